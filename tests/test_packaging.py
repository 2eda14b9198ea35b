"""Packaging: the default pricing snapshot ships as package data; an installed ragbatch runs
from any directory (a real ``pip install`` into a fresh venv, then ``ragbatch run``)."""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from ragbatch.run._config import DEFAULT_PRICING, PRICING_NAME

ROOT = Path(__file__).resolve().parent.parent
PRICING_BYTES = (ROOT / "pricing" / PRICING_NAME).read_bytes()


def test_packaged_snapshot_is_the_versioned_one_byte_for_byte() -> None:
    # pricing/ is the versioned source; the package's copy must never drift from it
    assert DEFAULT_PRICING.is_absolute()
    assert DEFAULT_PRICING.parent.parent == ROOT / "ragbatch"
    assert DEFAULT_PRICING.read_bytes() == (ROOT / "pricing" / PRICING_NAME).read_bytes()


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# import name -> the declared distribution that brings it (click: typer before it vendored
# click as typer._click; cli/usage.py falls back to it there)
DISTRIBUTION = {
    "yaml": "pyyaml",
    "pydantic_core": "pydantic",
    "markupsafe": "jinja2",
    "click": "typer",
    "opentelemetry": "opentelemetry-sdk",  # a namespace: the SDK and its OTLP exporter fill it
}
PYTEST11 = (
    "from importlib.metadata import entry_points\n"
    "for e in entry_points(group='pytest11'): print(f'{e.name}={e.value}')"
)
# modules that only lazy imports reach (the ``html`` extra), and the plugin only pytest loads
EXTRA_ONLY = {"report/_charts.py", "pytest_plugin.py"}


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0] for r in requirements}


def third_party_imports(top_level_only: bool) -> set[str]:
    """The distributions the package's modules import (module level, or anywhere)."""
    imported: set[str] = set()
    for path in (ROOT / "ragbatch").rglob("*.py"):
        if top_level_only and path.relative_to(ROOT / "ragbatch").as_posix() in EXTRA_ONLY:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body if top_level_only else ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    imported -= set(sys.stdlib_module_names) | {"ragbatch", "__future__"}
    return {DISTRIBUTION.get(name, name) for name in imported}


def test_every_third_party_import_is_declared() -> None:
    required = names(PROJECT["dependencies"])
    extras = set().union(*(names(group) for group in PROJECT["optional-dependencies"].values()))
    assert third_party_imports(top_level_only=True) <= required
    assert third_party_imports(top_level_only=False) <= required | extras
    # imported lazily by the live progress display, never an extra: a plain dependency
    assert "rich" in third_party_imports(top_level_only=False)
    assert "rich" in required


def test_snapshot_is_declared_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pricing/*.json" in project["tool"]["setuptools"]["package-data"]["ragbatch"]


@pytest.mark.slow  # a pip install of the package and its dependencies: a minute or more
@pytest.mark.timeout(600)
def test_fresh_venv_install_runs_from_another_directory(tmp_path: Path) -> None:
    # the source is copied so the build writes nothing into the checkout (build/, egg-info)
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "ragbatch", source / "ragbatch", ignore=shutil.ignore_patterns("__pycache__")
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(source)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy2(ROOT / "datasets" / "rag-fixture.jsonl", work / "rows.jsonl")
    run = subprocess.run(
        [str(venv / "bin" / "ragbatch"), "run", "rows.jsonl", "--out", "report.json", "--quiet"],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PATH": str(venv / "bin"), "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    report = orjson.loads((work / "report.json").read_bytes())
    committed = orjson.loads(PRICING_BYTES)
    assert report["pricing"]["version"] == committed["version"]
    assert report["pricing"]["sha256"] == hashlib.sha256(PRICING_BYTES).hexdigest()
    assert report["dataset"]["rows"] > 0
    # the pytest plugin is registered in the installed metadata
    plugins = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PYTEST11],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ragbatch=ragbatch.pytest_plugin" in plugins.stdout.split()
