"""Pure metrics: every number of the report, computed exactly from compact per-row values.

Owns classification, calibration, selective prediction and latency (``scores``), ranking,
answer checks and abstention, claim metrics, slices, the diagnostic matrix, golden-set
sections (``golden``), the cascade trade-off (``tradeoff``) and prediction-powered inference
of true rates from human labels (``ppi``).

Pure (no I/O). May import ``core``.
"""
