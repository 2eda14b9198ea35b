"""Rows in: dataset readers with file and line in every error, and derived datasets.

Owns what every reader shares (``base``: the :class:`RowSource` protocol, the
:class:`FileReader` base, bounded line reading, duplicate ids, error wording), the format
registry and :func:`open_dataset` (``formats``), ragbatch's own JSONL (``jsonl``), your own CSV
columns (``mapped_csv``), JSON/CSV/Parquet records with line numbers (``records``), other
tools' exports (``ragas``, ``deepeval``, and trace exports mapped by ``traces``:
``openinference``, ``langfuse``), hints for a file given in the wrong format (``hints``),
golden-set YAML joined with outputs (``golden_yaml``), counterfactual rows
(``counterfactual``). The output files every layer writes are ``ragbatch.files``.

Reads and writes files. May import ``core`` and ``ragbatch.files`` only.
"""
