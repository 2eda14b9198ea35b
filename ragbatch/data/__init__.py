"""Rows in: dataset readers with file and line in every error, and derived datasets.

Owns the streaming JSONL reader (``jsonl``), the format registry and mapped CSV
(``formats``), JSON/CSV records with line numbers (``records``), other tools' exports
(``ragas``, ``deepeval``, and trace exports mapped by ``traces``: ``openinference``,
``langfuse``), golden-set YAML joined with outputs (``golden_yaml``), counterfactual rows
(``counterfactual``), the human labels file (``labels``), and the output files every layer writes, checked up front and written
atomically (``output``).

Reads and writes files. May import ``core`` only.
"""
