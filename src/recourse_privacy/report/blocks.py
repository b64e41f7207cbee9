"""The report's reference blocks: the model, recourse, data, shadow models, warnings, timing, the settings,
and the guide to reading the numbers. Each lays out one part of a typed audit result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path

from recourse_privacy.report.markup import cell as _fmt
from recourse_privacy.report.markup import escape as _e
from recourse_privacy.report.markup import is_number as _is_num
from recourse_privacy.report.markup import rows_table as _rows
from recourse_privacy.report.markup import text as _t
from recourse_privacy.results.audit import AuditRecord

__all__ = [
    "HOW_TO_READ",
    "config_section",
    "data_section",
    "data_source",
    "dataset_label",
    "model_section",
    "recourse_section",
    "shadow_section",
    "timing_section",
    "warnings_section",
]


def data_source(result: AuditRecord) -> str:
    """The user's data file, or the description of their DataFrame (e.g. ``DataFrame(900x5)``)."""
    data = result.config.data
    return data if isinstance(data, str) else str(result.data.dataset)


def dataset_label(result: AuditRecord) -> str:
    """The named dataset, or for --data the file name and its target column."""
    cfg = result.config
    if cfg.data is not None:
        source = data_source(result)
        name = Path(source).name or source
        return f"{name} (target column {cfg.target})" if cfg.target else name
    return str(cfg.dataset)


def model_section(result: AuditRecord) -> str:
    m = result.model
    return (
        _rows(
            [
                ("model", m.name, ""),
                ("train accuracy (members)", m.train_accuracy, ".4g"),
                ("test accuracy (non-members)", m.test_accuracy, ".4g"),
                ("train − test accuracy", m.generalization_gap, ".4g"),
                *([("decision cutoff", f"{m.cutoff_line} ({m.threshold_source})", "")] if m.cutoff_line else []),
            ]
        )
        + '<p class="small">A large gap between train and test accuracy (overfitting) is the usual driver '
        "of membership leakage.</p>"
    )


def recourse_section(result: AuditRecord) -> str:
    r = result.recourse
    return _rows(
        [
            ("method", r.method, ""),
            ("targets", r.n, ""),
            ("validity (share of counterfactuals that flip the prediction)", r.validity, ".4g"),
            ("validity, members", r.validity_members, ".4g"),
            ("validity, non-members", r.validity_nonmembers, ".4g"),
            ("invalid counterfactuals", r.n_invalid, ""),
            ("mean L1 cost", r.mean_l1, ".4g"),
            ("mean L2 cost", r.mean_l2, ".4g"),
            ("distance the attacks read", r.distance, ""),
            ("seconds", r.seconds, ".3g"),
        ]
    )


def data_section(result: AuditRecord) -> str:
    d = result.data
    return _rows(
        [
            ("data", dataset_label(result), ""),
            ("rows", d.n_rows, ""),
            ("features (after preprocessing)", d.n_features, ""),
            ("member pool", d.pools.members, ""),
            ("non-member pool", d.pools.nonmembers, ""),
            ("adversary pool", d.pools.adversary, ""),
            ("features dropped as correlated", d.dropped_correlated, ""),
        ]
    )


def shadow_section(result: AuditRecord) -> str:
    s = result.shadow
    if s is None:
        return ""
    return "<h2>Shadow models</h2>" + _rows(
        [
            ("shadow models", s.n, ""),
            ("share of the adversary's pool each trains on", s.fraction, ".3g"),
            ("training rows each", s.train_rows, ""),
            ("mean train accuracy", s.mean_train_accuracy, ".4g"),
            ("calibration pseudo-targets", s.n_calibration, ""),
        ]
    )


def warnings_section(warnings_: Sequence[str], problems: Sequence[str]) -> str:
    items = [str(w) for w in warnings_] + list(problems)
    if not items:
        return "<p>None.</p>"
    return '<ul class="warnings">' + "".join(f"<li>{_t(w)}</li>" for w in items) + "</ul>"


def timing_section(timing: Mapping[str, float]) -> str:
    if not timing:
        return '<p class="small">Not recorded.</p>'
    total = timing.get("total")
    rows = []
    for stage, sec in timing.items():
        if stage == "total":
            continue
        share = (
            f' <span class="small">({100 * sec / total:.0f}%)</span>' if total and _is_num(sec) and total > 0 else ""
        )
        rows.append(f'<tr><th>{_e(stage)}</th><td class="num">{_fmt(float(sec), ".2f")}{share}</td></tr>')
    if total is not None:
        rows.append(f'<tr class="total"><th>total</th><td class="num">{_fmt(float(total), ".2f")}</td></tr>')
    return "<table><tr><th>stage</th><th>seconds</th></tr>" + "".join(rows) + "</table>"


def config_section(result: AuditRecord) -> str:
    cfg = result.config
    rows = [(f.name.replace("_", " "), getattr(cfg, f.name), ".4g") for f in fields(cfg)]
    return (
        "<details><summary>All settings of this audit (click to expand)</summary>"
        + _rows(rows)
        + f'<p class="small">metrics.json schema version {_e(result.schema_version)}.</p></details>'
    )


HOW_TO_READ = """
<ul>
<li><strong>Labels and scores.</strong> Members are the model's training points, non-members
points it never saw. Every attack gives each point a score; a higher score means
&ldquo;more likely a member&rdquo; (the table of conventions says how each attack's statistic
was oriented, e.g. a larger counterfactual distance means member, Pawelczyk et al. 2023, eq. 3).</li>
<li><strong>TPR at a fixed FPR.</strong> The false-positive rate (FPR) is the share of
non-members wrongly flagged as members; the true-positive rate (TPR) is the share of members
correctly identified. &ldquo;TPR at FPR 0.01&rdquo; is the <em>largest TPR among the points of
the ROC curve whose FPR is at most 0.01</em>, with no interpolation between points; the FPR
that point actually achieves is shown in brackets. Random guessing gives TPR = FPR. With
fewer than 1/FPR non-members the smallest non-zero FPR the data can show is larger than the
target, so such cells are marked unreliable. This low-FPR reading is the one advocated by
Carlini et al. 2022 (LiRA) and used by Pawelczyk et al. 2023: an attack that identifies even a few
members with high confidence is a privacy failure.</li>
<li><strong>AUC</strong> is the area under the ROC curve (ties count one half): the
probability that a random member scores higher than a random non-member. 0.5 is random
guessing. Without leakage, AUC stays within 0.5 &plusmn; 1.96&middot;&radic;((n<sub>1</sub> +
n<sub>0</sub> + 1) / (12&middot;n<sub>1</sub>&middot;n<sub>0</sub>)) about 95% of the time
(Mann&ndash;Whitney null variance; n<sub>1</sub> members, n<sub>0</sub> non-members); the
verdict calls leakage &ldquo;detected&rdquo; when an attack&rsquo;s interval (below) excludes 0.5.</li>
<li><strong>Intervals.</strong> Every AUC comes with a 95% percentile bootstrap interval (members and
non-members resampled separately, 1,000 seeded replicates); every TPR at a fixed FPR with an exact
Clopper&ndash;Pearson interval on the members, beside the Clopper&ndash;Pearson interval of the FPR its
threshold reached on the non-members (the threshold is read off the non-members, so its FPR is an
estimate too; the upper end bounds its true FPR). An attack detects leakage when its AUC interval
excludes 0.5 or its TPR interval lies above the FPR&rsquo;s.</li>
<li><strong>Several attacks at once.</strong> Each attack&rsquo;s own test is at 5%, so with k attacks
luck alone makes at least one leave chance up to k&middot;5% of the time (twice that with both arms).
The report also tests the attacks together: per attack, the Mann&ndash;Whitney p-value of its AUC against
0.5 and the exact p-value of its TPR at 1% FPR (without leakage the members above a threshold that k<sub>0</sub>
non-members exceed are negative hypergeometric), the smaller doubled; then Holm&rsquo;s step-down method
(Holm 1979) over the attacks, which holds that chance at 5%. An attack whose adjusted p-value is below
0.05 leaves chance even counting every attack and arm tried; leakage found by no such attack rests on
single tests.</li>
<li><strong>Scores versus recourse.</strong> Attacks are split by what they read, as each declares it:
the model&rsquo;s own outputs (loss, confidence: what the model leaks anyway) or the released
counterfactuals. Recourse is said to leak <em>beyond</em> the scores when the lead recourse attack detects
leakage and either the paired bootstrap interval of its AUC minus the lead score attack&rsquo;s
(same resampled targets for both) lies above 0, or its TPR interval at 1% FPR lies above every score
attack&rsquo;s. This compares single attacks: information that only a combination of both signals
reveals is not measured.</li>
<li><strong>Which attack is named.</strong> Each statement names its <em>lead attack</em>: the first
that ran of a fixed order, chosen before any score is seen (recourse attacks before score attacks,
reference-model tests before thresholds, online before offline; the order is
<code>metrics.exposure.RANKING_PREFERENCE</code>), and the lead score attack is the one the recourse
attacks are compared with. The attack of highest AUC on the targets is never chosen: its AUC is measured
with the targets&rsquo; membership labels, so the maximum over several attacks is optimistic (the
winner&rsquo;s curse). No attack&rsquo;s direction is flipped after its scores are seen.</li>
<li><strong>Balanced accuracy (BA)</strong> is (TPR + 1 &minus; FPR) / 2 at the <em>best</em>
threshold, i.e. it assumes the attacker knows the optimal threshold, as in Pawelczyk et al. 2023.
It is therefore optimistic for the attacker and never below 0.5.</li>
<li><strong>Theorem 2 bound.</strong> If the recourse is (&epsilon;, 0)-differentially private
in the training data, any attacker's BA is at most 1/2 + (1 &minus; e<sup>&minus;&epsilon;</sup>)/2
(Pawelczyk, Lakkaraju &amp; Neel 2023, Theorem 2). For small &epsilon; this is close to 0.5;
for large &epsilon; it approaches 1 and guarantees nothing. The defenses are those of
Huang et al. 2023 (a differentially private model, DPM, and Laplace Recourse).</li>
</ul>
"""
