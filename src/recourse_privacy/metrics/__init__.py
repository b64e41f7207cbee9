"""Membership-inference metrics (AUC, balanced accuracy, TPR at low FPR), their confidence intervals, and plots.

``recourse_privacy.metrics.plots`` imports matplotlib only when a plot is drawn.
"""

from __future__ import annotations

from recourse_privacy.metrics.intervals import (
    AucDifference,
    bootstrap_auc,
    clopper_pearson,
    minimum_detectable_auc,
    minimum_detectable_tpr,
    minimum_targets_per_side,
    paired_auc_difference,
    tpr_detected,
)
from recourse_privacy.metrics.membership import (
    DEFAULT_FPRS,
    AttackMetrics,
    LowFprWarning,
    RocCurve,
    TprAtFpr,
    attack_metrics,
    auc,
    auc_null_halfwidth,
    auc_null_pvalue,
    balanced_accuracy,
    fpr_key,
    roc,
    selected_target_privacy,
    theorem2_bound,
    tight_ba_bound,
    tpr_at_fpr,
    tpr_null_pvalue,
)
from recourse_privacy.metrics.plots import (
    plot_roc_loglog,
    plot_score_histogram,
    roc_loglog_figure,
    score_histogram_figure,
)
from recourse_privacy.metrics.quality import (
    constraint_violations,
    path_metrics,
    quality_metrics,
    redundancy,
    ynn,
)

__all__ = [
    "AucDifference",
    "bootstrap_auc",
    "clopper_pearson",
    "minimum_detectable_auc",
    "minimum_detectable_tpr",
    "minimum_targets_per_side",
    "paired_auc_difference",
    "tpr_detected",
    "DEFAULT_FPRS",
    "AttackMetrics",
    "LowFprWarning",
    "RocCurve",
    "TprAtFpr",
    "attack_metrics",
    "auc",
    "auc_null_halfwidth",
    "auc_null_pvalue",
    "tpr_null_pvalue",
    "balanced_accuracy",
    "fpr_key",
    "roc",
    "theorem2_bound",
    "tight_ba_bound",
    "selected_target_privacy",
    "tpr_at_fpr",
    "constraint_violations",
    "path_metrics",
    "quality_metrics",
    "redundancy",
    "ynn",
    "plot_roc_loglog",
    "plot_score_histogram",
    "roc_loglog_figure",
    "score_histogram_figure",
]
