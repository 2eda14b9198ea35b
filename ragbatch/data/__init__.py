"""Rows in: dataset readers with file and line in every error, and derived datasets.

Owns the streaming JSONL reader (``jsonl``), the other formats (``formats``: ragas, csv),
golden-set YAML joined with outputs (``golden_yaml``) and counterfactual rows
(``counterfactual``).

Reads files. May import ``core`` only.
"""
