"""Thresholds from labelled data: the fit, its bounds and search, and human audit.

Owns the fit under a risk target (``fit``), Clopper-Pearson bounds and AUROC (``bounds``),
the precedence table over per-judgment thresholds (``rules``), the grid search and
coordinate refinement (``search``, ``refine``), the policy file (``policy_file``) and the
stratified audit sample with judge-human agreement (``audit``).

Pure (works on parsed reports, returns bytes). May import ``metrics`` and ``core``.
"""
