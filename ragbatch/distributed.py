"""The documented import path of the Dask adapter: ``ragbatch.distributed.run_on_dask``
(docs/guides/large-runs.md).

The code lives in :mod:`ragbatch.run._dask`; this module keeps the documented import path.
"""

from ragbatch.run import local_cluster, run_on_dask

__all__ = ["local_cluster", "run_on_dask"]
