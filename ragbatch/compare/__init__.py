"""Two reports side by side (the CI gate, the diff, distribution drift), and one report
against human labels (``inference``: corrected rates; ``inference_gate``: the gate on them).

Pure: works on parsed report JSON or the typed report. May import ``report`` (its models),
``metrics`` and ``core``.
"""
