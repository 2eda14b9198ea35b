"""Two reports side by side: the CI gate, the diff and distribution drift.

Pure: works on parsed report JSON. May import ``metrics`` and ``core``.
"""
