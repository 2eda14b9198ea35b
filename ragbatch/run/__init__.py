"""Composition and execution: options -> parts -> the run -> report bytes.

Owns the options and result (``config``), the composition root that builds parts from
options (``factory``), the runner (the ONLY task group), the job end to end (``job``), the
spending limit (``budget``), progress, ``estimate``, option checks against the data before
the first row (``preflight``), shards and partials (``shards``),
``workers`` on one machine, stopping on a signal or a lost parent (``stop``) and the Dask
adapter (``dask``).

Does I/O. May import every layer below it: ``calibrate``, ``compare``, ``report``,
``metrics``, ``data``, ``providers``, ``core``.
"""
