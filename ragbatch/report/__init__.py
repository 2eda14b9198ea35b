"""The report: its models and deterministic bytes, the builder, and every view of it.

Owns the report models (``models``), the streaming builder that turns row outcomes into the
three modes (``builder``, ``modes``) and per-row results (``rows``), the ``--rows-out``
writer (``rows_out``), and the views: text summary (``text``), tables, Markdown, HTML and
its charts, and the corrected-rates section (``inference_view``).

Pure except ``rows_out`` (writes the JSONL stream) and ``html`` (loads its template from the
package); ``charts`` needs the ``html`` extra. May import ``metrics`` and ``core``.
"""
