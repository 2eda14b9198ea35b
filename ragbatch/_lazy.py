"""Front doors that import what they export on first use (PEP 562 module ``__getattr__``).

A run pays at start-up for every module its imports reach: a package's front door that
imports all it exports makes a ``ragbatch run`` on JSONL load the HTML report, the importers of
six foreign formats and the cache's merge tools it never calls, and start-up is a
large share of a short run's CPU. A front door lists those names under ``TYPE_CHECKING`` (for type checkers and
readers) and sets ``__getattr__ = lazy_exports(__name__, {module: names})``.

Imports nothing of ragbatch; does no I/O beyond importing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``modules[module]`` imports
    ``package.module`` when first asked for, and is then kept in the package's namespace."""
    origin = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = origin.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next lookup does not come here
        return value

    return __getattr__


__all__ = ["lazy_exports"]
