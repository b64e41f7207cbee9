"""The defenses the audit plays against, re-exported from :mod:`recourse_privacy.defenses`.

Each defense lives next to its mechanism, registered there (:mod:`~recourse_privacy.defenses.registry`:
the interface and ``none``; :mod:`~recourse_privacy.defenses.dpm`; :mod:`~recourse_privacy.defenses.laplace_defense`),
and the verdict on a DP claim in :mod:`~recourse_privacy.defenses.verdict`; this module keeps the
``recourse_privacy.audit.defenses`` imports of user code working.
"""

from __future__ import annotations

from recourse_privacy.defenses.dpm import DPMDefense
from recourse_privacy.defenses.laplace_defense import DPMLaplaceDefense, LaplaceDefense
from recourse_privacy.defenses.registry import DEFENSES, Defense, NoDefense, register_defense
from recourse_privacy.defenses.verdict import dp_verdict
from recourse_privacy.report.dp_verdict import dp_bounds

__all__ = [
    "DEFENSES",
    "Defense",
    "DPMDefense",
    "DPMLaplaceDefense",
    "LaplaceDefense",
    "NoDefense",
    "dp_bounds",
    "dp_verdict",
    "register_defense",
]
