"""User-facing evaluations behind the ``recourse`` and ``tradeoff`` commands (layer 6, beside the engine).

:mod:`~recourse_privacy.evaluation.quality`: recourse quality per method (``recourse-privacy recourse``);
:mod:`~recourse_privacy.evaluation.tradeoff`: the privacy-utility sweep of Huang et al. (2023)
(``recourse-privacy tradeoff``). Each plays the audit or fits the methods and writes its tables
and plots; neither is part of the grid engine (:mod:`recourse_privacy.experiments`).
"""
