"""Rows in: dataset readers with file and line in every error, and derived datasets.

Owns the streaming JSONL reader (``jsonl``), the format registry and mapped CSV
(``formats``), JSON/CSV records with line numbers (``records``), other tools' exports
(``ragas``, ``deepeval``, and trace exports mapped by ``traces``: ``openinference``,
``langfuse``), golden-set YAML joined with outputs (``golden_yaml``), counterfactual rows
(``counterfactual``) and the human labels file (``labels``). The output files every layer
writes are ``ragbatch.files``.

Reads and writes files. May import ``core`` and ``ragbatch.files`` only.
"""
