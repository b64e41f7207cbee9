"""One attack set against random guessing: its AUC's and its TPR's intervals at 1% FPR, and what it reads.

:func:`assess_attack` turns an :class:`~recourse_privacy.results.summaries.AttackResult` into an
:class:`AttackAssessment`, the unit :mod:`recourse_privacy.report.verdict` and
:mod:`recourse_privacy.report.chance` reason about. No markup here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from recourse_privacy.metrics.intervals import tpr_detected
from recourse_privacy.metrics.membership import auc_null_halfwidth
from recourse_privacy.results.summaries import AttackResult

__all__ = [
    "LOW_FPR",
    "AttackAssessment",
    "assess_attack",
    "finite_float",
    "percent",
    "signal_of",
    "sizes_known",
    "tpr_reliable",
]

#: the FPR key the verdict reads each attack at (TPR at 1% FPR)
LOW_FPR = "0.01"


# --------------------------------------------------------------------------- helpers


def finite_float(x: Any) -> float | None:
    """A finite float, or None for missing / non-numeric / non-finite values."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(x: Any) -> int | None:
    f = finite_float(x)
    return int(f) if f is not None and f == int(f) else None


def tpr_reliable(attack: AttackResult, key: str) -> bool | None:
    """Whether the TPR at FPR ``key`` is resolvable: the attack's own flag, else n_nonmembers >= 1/FPR."""
    r = attack.tpr_at_fpr_reliable.get(key)
    if isinstance(r, bool):
        return r
    f, n0 = finite_float(key), _int(attack.n_nonmembers)
    if n0 and f:
        return n0 >= math.ceil(1.0 / f - 1e-9)
    return None


# --------------------------------------------------------------------------- one attack


def signal_of(attack: AttackResult) -> str:
    """What ``attack`` reads: its recorded ``signal``, else (files of schema 1) its registry entry's, else ""."""
    s = str(attack.signal or "")
    if s:
        return s
    from recourse_privacy.attacks.registry import ATTACKS  # only for files written before signals were recorded

    name = str(attack.name)
    return str(ATTACKS.get(name).meta.get("signal", "")) if name in ATTACKS else ""


def _interval(x: Any) -> tuple[float, float] | None:
    """A finite (lo, hi) pair, or None."""
    if x is None:
        return None
    try:
        lo, hi = (finite_float(v) for v in x)
    except (TypeError, ValueError):
        return None
    return None if lo is None or hi is None else (lo, hi)


@dataclass(frozen=True)
class AttackAssessment:
    """One attack against random guessing.

    ``auc_ci`` is the AUC's bootstrap interval (None in files without one); ``halfwidth`` the ~95%
    null band 0.5 ± halfwidth of random guessing (None without sample sizes). ``auc_detected``: the
    AUC's interval excludes 0.5 (without an interval: the AUC lies outside the band); ``tpr_detected``:
    the TPR's interval at 1% FPR lies above the interval of the FPR its threshold reached (None when
    unknown); ``significant`` is either. ``reversed``: detected *below* 0.5 (leakage in the opposite
    direction). ``signal`` is what the attack reads (distance, score, none: a control).
    """

    name: str
    auc: float | None
    balanced_accuracy: float | None
    tpr_low_fpr: float | None
    n_members: int | None
    n_nonmembers: int | None
    halfwidth: float | None
    significant: bool | None
    is_control: bool
    signal: str = ""
    auc_ci: tuple[float, float] | None = None
    tpr_ci: tuple[float, float] | None = None
    fpr_ci: tuple[float, float] | None = None
    auc_detected: bool | None = None
    tpr_detected: bool | None = None

    @property
    def sizes_known(self) -> bool:
        """Both sides' target counts are known and positive (the chance tests need them)."""
        return sizes_known(self.n_members, self.n_nonmembers)

    @property
    def reversed(self) -> bool:
        """Significant with an AUC below 0.5."""
        return bool(self.auc_detected) and self.auc is not None and self.auc < 0.5


def sizes_known(n1: int | None, n0: int | None) -> bool:
    """Whether both sides' target counts are known and positive."""
    return bool(n1 and n0 and n1 > 0 and n0 > 0)


def assess_attack(attack: AttackResult) -> AttackAssessment:
    """Compare ``attack``'s AUC and TPR at 1% FPR with random guessing, through their intervals."""
    auc = finite_float(attack.auc)
    n1, n0 = _int(attack.n_members), _int(attack.n_nonmembers)
    hw = auc_null_halfwidth(n1, n0) if sizes_known(n1, n0) else None
    auc_ci = _interval(attack.auc_ci)
    tpr_ci = _interval(attack.tpr_at_fpr_ci.get(LOW_FPR))
    fpr_ci = _interval(attack.achieved_fpr_ci.get(LOW_FPR))
    if auc is None:
        auc_sig = None
    elif auc_ci is not None:
        auc_sig = auc_ci[0] > 0.5 or auc_ci[1] < 0.5
    else:
        auc_sig = None if hw is None else abs(auc - 0.5) > hw
    tpr_sig = tpr_detected(tpr_ci[0], fpr_ci[1]) if tpr_ci is not None and fpr_ci is not None else None
    sig = True if (auc_sig or tpr_sig) else (None if auc_sig is None else False)
    signal = signal_of(attack)
    return AttackAssessment(
        name=str(attack.name),
        auc=auc,
        balanced_accuracy=finite_float(attack.balanced_accuracy),
        tpr_low_fpr=finite_float(attack.tpr_at_fpr.get(LOW_FPR)),
        n_members=n1,
        n_nonmembers=n0,
        halfwidth=hw,
        significant=sig,
        is_control=signal == "none",
        signal=signal,
        auc_ci=auc_ci,
        tpr_ci=tpr_ci,
        fpr_ci=fpr_ci,
        auc_detected=auc_sig,
        tpr_detected=tpr_sig,
    )


def percent(x: float) -> str:
    """0.035 -> '3.5%'."""
    return format(100.0 * x, ".3g") + "%"
