"""Empirical epsilon audits: lower bounds on a DP mechanism's epsilon from distinguishing experiments.

:mod:`~recourse_privacy.dp_audit.bounds` holds the statistics (Clopper-Pearson bounds, the
threshold test chosen on one half of the runs and measured on the other, :class:`EpsilonAudit`);
:mod:`~recourse_privacy.dp_audit.experiments` the ready-made scalar experiments and
:mod:`~recourse_privacy.dp_audit.trained` the end-to-end ones with trained neighbours (many-run and
the one-run audit of Steinke, Nasr and Jagielski 2023) that the ``audit-dp`` command runs.
:mod:`~recourse_privacy.dp_audit.canary_scores` audits a user's own canary scores (``audit-dp
--scores``) with the Clopper-Pearson, one-run, one-run f-DP and GDP bounds of
:mod:`~recourse_privacy.dp_audit.fdp`. :mod:`~recourse_privacy.dp_audit.releases` audits every private
release the package ships beside a broken twin (DP-SGD with the dirac canaries of
:mod:`~recourse_privacy.dp_audit.dpsgd_canaries`), and :mod:`~recourse_privacy.dp_audit.defense_audit`
audits the defense in use for the report (``audit --dp-audit``).
"""

from recourse_privacy.dp_audit.bounds import (
    DistinguishingExperiment,
    EpsilonAudit,
    audit_mechanism,
    clopper_pearson,
    epsilon_lower_bound,
)
from recourse_privacy.dp_audit.canary_scores import ScoreBound, ScoresAudit, audit_scores, read_scores_csv
from recourse_privacy.dp_audit.experiments import (
    MECHANISMS,
    audit_dp,
    broken_laplace_experiment,
    dpm_canary_data,
    dpm_logistic_experiment,
    laplace_experiment,
    make_experiment,
)
from recourse_privacy.dp_audit.trained import RELEASES, OneRunAudit, one_run_audit, one_run_bound, trained_experiment

__all__ = [
    "MECHANISMS",
    "DistinguishingExperiment",
    "EpsilonAudit",
    "audit_dp",
    "audit_mechanism",
    "broken_laplace_experiment",
    "clopper_pearson",
    "dpm_canary_data",
    "dpm_logistic_experiment",
    "epsilon_lower_bound",
    "laplace_experiment",
    "make_experiment",
    "RELEASES",
    "OneRunAudit",
    "one_run_audit",
    "one_run_bound",
    "trained_experiment",
    "ScoreBound",
    "ScoresAudit",
    "audit_scores",
    "read_scores_csv",
]
