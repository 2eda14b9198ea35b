"""The pure domain: what a row, a question, a reply, a verdict and a price *are*.

Owns the error tree (``errors``), the dataset models (``schema``), the Jev wire protocol
(``wire``), row -> request (``questions``), claim mode's questions and veto (``claims``), the
diagnosis policy and its routings (``policy``), price snapshots (``pricing``), one row's outcome
(``outcome``) and the provider protocol types (``provider``).

Pure: no httpx, diskcache, anyio, typer, sqlite, no file or network I/O (``tests/test_layers.py``
checks the source). Imports nothing of ragbatch outside ``core``.
"""
