"""One self-contained HTML file summarising a membership-inference audit.

The report is meant for a model-risk reviewer without a terminal: a plain-words
verdict first, then the configuration, the model, the recourse, every attack's
numbers with the conventions that produced them, the differential-privacy bound
(when present), warnings, figures (embedded as base64 data URIs) and a short guide
to reading the numbers. No external CSS, no JavaScript; every string is escaped.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from recourse_privacy.metrics.membership import auc_null_halfwidth, theorem2_bound

__all__ = ["write_html_report"]

_EMPTY: Mapping[str, str | Path] = MappingProxyType({})

# Attack names treated as a random-guessing control: shown, but not used for the verdict.
_CONTROL_NAMES = frozenset({"random", "random-guess", "random_guess", "baseline-random"})

_KNOWN_TOP = frozenset(
    {"config", "model", "recourse", "n_members", "n_nonmembers", "attacks", "dp",
     "warnings", "timing"}
)
_ATTACK_NUMERIC = frozenset(
    {"auc", "balanced_accuracy", "tpr_at_fpr", "achieved_fpr", "tpr_at_fpr_reliable",
     "n_members", "n_nonmembers"}
)
_CONVENTION_KEYS = ("direction", "direction_source", "convention", "variance", "center", "cdf")

_MIME = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
}

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 62em; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
.verdict { padding: 0.8em 1em; border-left: 6px solid #888; background: #f6f6f6; }
.verdict.leak { border-color: #c0392b; background: #fdf0ee; }
.verdict.noleak { border-color: #27ae60; background: #eef9f1; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.95em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.unreliable { background: #fff4d6; }
.small { font-size: 0.85em; color: #555; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; }
ul.warnings li { margin-bottom: 0.3em; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
"""


# --------------------------------------------------------------------------- formatting


def _e(x: Any) -> str:
    """Escape anything for HTML text or attribute context."""
    return html.escape(str(x), quote=True)


def _float(x: Any) -> float | None:
    """A finite float, or None for missing / non-numeric / non-finite values."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(x: Any) -> int | None:
    f = _float(x)
    return int(f) if f is not None and f == int(f) else None


def _fmt(x: Any, spec: str = ".3g") -> str:
    """Format a value for a table cell (already escaped)."""
    if x is None:
        return "&mdash;"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return _e(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "&infin;" if x > 0 else "&minus;&infin;"
        return _e(format(x, spec))
    if isinstance(x, (list, tuple)):
        return _e(", ".join(str(v) for v in x))
    if isinstance(x, Mapping):
        return _e(json.dumps(x, default=str, sort_keys=True))
    return _e(x)


def _pct(x: float) -> str:
    """0.035 -> '3.5%'."""
    return format(100.0 * x, ".3g") + "%"


def _kv_table(data: Mapping, labels: Mapping[str, str] | None = None,
              specs: Mapping[str, str] | None = None) -> str:
    """Two-column table: known keys first (with friendly labels), then the rest."""
    labels = labels or {}
    specs = specs or {}
    keys = [k for k in labels if k in data] + [k for k in data if k not in labels]
    rows = []
    for k in keys:
        v = data[k]
        cls = ' class="num"' if _float(v) is not None else ""
        rows.append(
            f"<tr><th>{_e(labels.get(k, k))}</th>"
            f"<td{cls}>{_fmt(v, specs.get(k, '.4g'))}</td></tr>"
        )
    if not rows:
        return '<p class="small">Not reported.</p>'
    return "<table>" + "".join(rows) + "</table>"


def _as_mapping(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


# --------------------------------------------------------------------------- attacks


def _fpr_sort_key(key: str) -> tuple[int, float, str]:
    f = _float(key)
    return (0, -f, key) if f is not None else (1, 0.0, key)


class _Attack:
    """The numbers of one attack, read defensively from the metrics dict."""

    def __init__(self, name: str, data: Mapping, n1: Any, n0: Any) -> None:
        self.name = str(name)
        self.data = data
        self.auc = _float(data.get("auc"))
        self.ba = _float(data.get("balanced_accuracy"))
        self.tpr = _as_mapping(data.get("tpr_at_fpr"))
        self.achieved = _as_mapping(data.get("achieved_fpr"))
        self.reliable_map = _as_mapping(data.get("tpr_at_fpr_reliable"))
        self.n1 = _int(data.get("n_members", n1))
        self.n0 = _int(data.get("n_nonmembers", n0))
        self.is_control = self.name.strip().lower() in _CONTROL_NAMES

    @property
    def halfwidth(self) -> float | None:
        if self.n1 and self.n0 and self.n1 > 0 and self.n0 > 0:
            return auc_null_halfwidth(self.n1, self.n0)
        return None

    @property
    def significant(self) -> bool | None:
        """True if AUC is outside the ~95% null band around 0.5; None if unknown."""
        hw = self.halfwidth
        if self.auc is None or hw is None:
            return None
        return abs(self.auc - 0.5) > hw

    def tpr_at(self, key: str) -> float | None:
        return _float(self.tpr.get(key))

    def reliable(self, key: str) -> bool | None:
        r = self.reliable_map.get(key)
        if isinstance(r, bool):
            return r
        f = _float(key)
        if self.n0 and f:
            return self.n0 >= math.ceil(1.0 / f - 1e-9)
        return None


def _read_attacks(metrics: Mapping) -> list[_Attack]:
    raw = metrics.get("attacks")
    n1, n0 = metrics.get("n_members"), metrics.get("n_nonmembers")
    out: list[_Attack] = []
    if isinstance(raw, Mapping):
        for name, data in raw.items():
            if isinstance(data, Mapping):
                out.append(_Attack(name, data, n1, n0))
    elif isinstance(raw, (list, tuple)):
        for i, data in enumerate(raw):
            if isinstance(data, Mapping):
                out.append(_Attack(data.get("name", f"attack {i + 1}"), data, n1, n0))
    return out


def _strength(a: _Attack) -> tuple[float, float]:
    t = a.tpr_at("0.01")
    return (t if t is not None else -1.0, a.auc if a.auc is not None else -1.0)


# --------------------------------------------------------------------------- sections


def _verdict(attacks: list[_Attack]) -> tuple[str, str]:
    """(css class, HTML paragraph) of the plain-words verdict."""
    scored = [a for a in attacks if a.auc is not None]
    if not scored:
        return "", (
            "<p><strong>No verdict.</strong> The metrics contain no attack results with an "
            "AUC, so leakage could not be assessed.</p>"
        )
    candidates = [a for a in scored if not a.is_control] or scored
    controls = [a for a in scored if a.is_control and a not in candidates]
    sig = [a for a in candidates if a.significant]
    unknown = [a for a in candidates if a.significant is None]
    best = max(candidates, key=_strength)

    parts: list[str] = []
    if sig:
        css, head = "leak", "Leakage detected."
    elif unknown:
        css, head = "", "Leakage could not be fully assessed."
    else:
        css, head = "noleak", "No measurable leakage."
    parts.append(f"<strong>{head}</strong>")

    t01 = best.tpr_at("0.01")
    if t01 is not None:
        ach = _float(best.achieved.get("0.01"))
        ach_txt = f"; achieved FPR {_fmt(ach, '.2g')}" if ach is not None else ""
        rel = best.reliable("0.01")
        rel_txt = (
            f" (unreliable: only {best.n0} non-members, at least 100 are needed to "
            "resolve a 1% FPR)" if rel is False else ""
        )
        parts.append(
            f"The strongest attack, <em>{_e(best.name)}</em>, reaches a true-positive rate "
            f"(TPR) of {_fmt(t01, '.3g')} at a 1% false-positive rate (FPR &le; 0.01"
            f"{ach_txt}){rel_txt} with AUC {_fmt(best.auc, '.3f')}; random guessing gives "
            "TPR 0.01 at 1% FPR and AUC 0.5."
        )
        parts.append(
            f"A TPR at 1% FPR of {_fmt(t01, '.3g')} means the attacker identifies "
            f"{_e(_pct(t01))} of members while wrongly flagging 1% of non-members."
        )
    else:
        parts.append(
            f"The strongest attack by AUC, <em>{_e(best.name)}</em>, has AUC "
            f"{_fmt(best.auc, '.3f')} (random guessing: 0.5); no TPR at 1% FPR was reported."
        )

    hws = [a.halfwidth for a in candidates if a.halfwidth is not None]
    if hws:
        band = max(hws)
        n_txt = ""
        if best.n1 and best.n0:
            n_txt = f" with {best.n1} members and {best.n0} non-members"
        if sig:
            names = ", ".join(
                f"{_e(a.name)} (AUC {_fmt(a.auc, '.3f')})" for a in sorted(sig, key=lambda a: -abs(a.auc - 0.5))
            )
            parts.append(
                f"{len(sig)} of {len(candidates)} attack(s) have an AUC outside the band "
                f"0.5 &plusmn; {_fmt(band, '.2g')} within which random guessing stays 95% of "
                f"the time{n_txt}: {names}."
            )
            below = [a for a in sig if a.auc is not None and a.auc < 0.5]
            if below:
                parts.append(
                    "An AUC significantly below 0.5 ("
                    + ", ".join(_e(a.name) for a in below)
                    + ") is also leakage: membership is revealed, but in the direction "
                    "opposite to that attack's convention."
                )
        else:
            parts.append(
                f"Every attack's AUC is within 0.5 &plusmn; {_fmt(band, '.2g')}, the ~95% band "
                f"of random guessing{n_txt}."
            )
        if len(candidates) > 1:
            k = len(candidates)
            parts.append(
                f"With {k} attacks checked at once, the chance that at least one falls outside "
                f"the band by luck alone is up to about {min(100, 5 * k)}%."
            )
    if unknown:
        parts.append(
            "Sample sizes were missing for "
            + ", ".join(_e(a.name) for a in unknown)
            + ", so their AUC could not be compared with the noise of random guessing."
        )
    if controls:
        parts.append(
            "The "
            + ", ".join(f"<em>{_e(a.name)}</em>" for a in controls)
            + " attack is a random-guessing control and is not counted in this verdict "
            "(its numbers show the noise level of this audit)."
        )
    return css, "<p>" + " ".join(parts) + "</p>"


def _attacks_table(attacks: list[_Attack]) -> str:
    if not attacks:
        return '<p class="small">No attack results were reported.</p>'
    keys: list[str] = []
    for a in attacks:
        for k in a.tpr:
            if k not in keys:
                keys.append(str(k))
    keys.sort(key=_fpr_sort_key)
    head = (
        "<tr><th>attack</th><th>AUC</th><th>AUC outside random band?</th>"
        "<th>balanced accuracy (best threshold)</th>"
        + "".join(f"<th>TPR at FPR &le; {_e(k)}<br><span class=\"small\">(achieved FPR)</span></th>" for k in keys)
        + "<th>members / non-members</th></tr>"
    )
    rows = []
    any_unreliable = False
    for a in attacks:
        hw = a.halfwidth
        auc_cell = _fmt(a.auc, ".3f")
        if hw is not None and a.auc is not None:
            auc_cell += f' <span class="small">(band 0.5 &plusmn; {_fmt(hw, ".2g")})</span>'
        s = a.significant
        if s is None:
            sig_cell = "unknown"
        elif s:
            sig_cell = "yes, above 0.5" if a.auc > 0.5 else "yes, below 0.5 (reversed)"
        else:
            sig_cell = "no"
        if a.is_control:
            sig_cell += ' <span class="small">(control)</span>'
        cells = [
            f"<td>{_e(a.name)}</td>",
            f'<td class="num">{auc_cell}</td>',
            f"<td>{sig_cell}</td>",
            f'<td class="num">{_fmt(a.ba, ".3f")}</td>',
        ]
        for k in keys:
            t = a.tpr_at(k)
            if t is None:
                cells.append('<td class="num">&mdash;</td>')
                continue
            ach = _float(a.achieved.get(k))
            txt = _fmt(t, ".3g")
            if ach is not None:
                txt += f' <span class="small">({_fmt(ach, ".2g")})</span>'
            if a.reliable(k) is False:
                any_unreliable = True
                cells.append(
                    f'<td class="num unreliable" title="too few non-members for this FPR">'
                    f"{txt} &dagger;</td>"
                )
            else:
                cells.append(f'<td class="num">{txt}</td>')
        n_txt = f"{a.n1 if a.n1 is not None else '?'} / {a.n0 if a.n0 is not None else '?'}"
        cells.append(f'<td class="num">{_e(n_txt)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = ""
    if any_unreliable:
        note = (
            '<p class="small">&dagger; Unreliable: fewer than 1/FPR non-members, so the '
            "target FPR is finer than the smallest non-zero FPR these data can show "
            "(1 / number of non-members).</p>"
        )
    return "<table>" + head + "".join(rows) + "</table>" + note


def _conventions_table(attacks: list[_Attack]) -> str:
    if not attacks:
        return '<p class="small">No attacks.</p>'
    extra: list[str] = []
    for a in attacks:
        for k, v in a.data.items():
            if (k not in _ATTACK_NUMERIC and k not in _CONVENTION_KEYS and k not in extra
                    and not isinstance(v, Mapping)):
                extra.append(k)
    cols = list(_CONVENTION_KEYS) + extra
    labels = {
        "direction": "direction",
        "direction_source": "where the direction came from",
        "convention": "decision rule",
        "variance": "variance",
        "center": "center",
        "cdf": "cdf",
    }
    head = "<tr><th>attack</th>" + "".join(f"<th>{_e(labels.get(c, c))}</th>" for c in cols) + "</tr>"
    rows = []
    for a in attacks:
        cells = [f"<td>{_e(a.name)}</td>"]
        for c in cols:
            v = a.data.get(c)
            cells.append(f"<td>{_fmt(v, '.4g')}</td>" if v is not None else "<td>&mdash;</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<table>" + head + "".join(rows) + "</table>"
        '<p class="small">&ldquo;greater&rdquo;: a larger statistic means &ldquo;member&rdquo; '
        "(e.g. counterfactual distance, Pawelczyk et al. 2023 eq. 3); &ldquo;less&rdquo;: a smaller one does "
        "(e.g. loss, eq. 2). Variance / center / cdf describe how likelihood-ratio attacks "
        "model the shadow-model statistics; &mdash; means not applicable or not reported.</p>"
    )


def _dp_section(dp: Mapping, attacks: list[_Attack]) -> str:
    eps_q = _float(dp.get("epsilon_per_query"))
    eps_t = _float(dp.get("epsilon_total"))
    bound = _float(dp.get("ba_bound"))
    source = "as reported by the audit"

    def _b(eps: float | None) -> float | None:
        if eps is None:
            return None
        try:
            return theorem2_bound(eps)
        except ValueError:
            return None

    bq, bt = _b(eps_q), _b(eps_t)
    if bound is None:
        if bq is not None:
            bound, source = bq, f"computed from &epsilon; per query = {_fmt(eps_q, '.4g')}"
        elif bt is not None:
            bound, source = bt, f"computed from total &epsilon; = {_fmt(eps_t, '.4g')}"
    else:
        if bq is not None and abs(bq - bound) < 1e-6:
            source = f"from &epsilon; per query = {_fmt(eps_q, '.4g')}"
        elif bt is not None and abs(bt - bound) < 1e-6:
            source = f"from total &epsilon; = {_fmt(eps_t, '.4g')}"

    out = [
        _kv_table(
            dp,
            {
                "defense": "defense",
                "epsilon_per_query": "ε per query (one recourse)",
                "epsilon_total": "ε total (all recourses released)",
                "ba_bound": "Theorem 2 bound on balanced accuracy",
            },
        )
    ]
    if bound is None:
        out.append(
            '<p class="small">No valid &epsilon; was reported, so the Theorem 2 bound '
            "could not be computed.</p>"
        )
        return "".join(out)
    vacuous = bound >= 0.9995
    out.append(
        f"<p>Theorem 2 (Pawelczyk et al. 2023): if the recourse mechanism is (&epsilon;, 0)-differentially "
        f"private, no attacker's balanced accuracy exceeds 1/2 + (1 &minus; e<sup>&minus;&epsilon;</sup>)/2"
        f" = <strong>{_fmt(bound, '.4f')}</strong> ({source})."
        + (" This bound is vacuous (close to 1): it rules nothing out." if vacuous else "")
        + "</p>"
    )
    if bt is not None and eps_t is not None and abs(bt - bound) > 1e-6:
        out.append(
            f'<p class="small">With the total &epsilon; = {_fmt(eps_t, ".4g")} of every recourse '
            f"released (basic composition) the bound would be {_fmt(bt, '.4f')}.</p>"
        )
    rows = []
    for a in attacks:
        if a.ba is None:
            status = "&mdash;"
        elif vacuous:
            status = "bound vacuous"
        elif a.ba <= bound:
            status = "within bound"
        else:
            status = ("<strong>above bound</strong> (the measured BA is a maximum over "
                      "thresholds and noisy; a large excess suggests the DP guarantee does not hold)")
        rows.append(
            f"<tr><td>{_e(a.name)}</td><td class=\"num\">{_fmt(a.ba, '.3f')}</td>"
            f"<td class=\"num\">{_fmt(bound, '.4f')}</td><td>{status}</td></tr>"
        )
    if rows:
        out.append(
            "<table><tr><th>attack</th><th>measured balanced accuracy</th>"
            "<th>Theorem 2 bound</th><th></th></tr>" + "".join(rows) + "</table>"
        )
    return "".join(out)


def _warnings_section(warnings_: Any, extra: list[str]) -> str:
    items: list[str] = []
    if isinstance(warnings_, str):
        items.append(warnings_)
    elif isinstance(warnings_, (list, tuple)):
        items.extend(str(w) for w in warnings_)
    elif warnings_ is not None:
        items.append(str(warnings_))
    items.extend(extra)
    if not items:
        return "<p>None.</p>"
    return '<ul class="warnings">' + "".join(f"<li>{_e(w)}</li>" for w in items) + "</ul>"


def _images_section(images: Mapping[str, str | Path], problems: list[str]) -> str:
    figs = []
    for caption, p in images.items():
        path = Path(p)
        mime = _MIME.get(path.suffix.lower(), "image/png")
        try:
            data = path.read_bytes()
        except OSError as exc:
            problems.append(f"figure {caption!s} could not be embedded: {exc}")
            continue
        if not data:
            problems.append(f"figure {caption!s} could not be embedded: {path} is empty")
            continue
        b64 = base64.b64encode(data).decode("ascii")
        figs.append(
            f'<figure><img src="data:{mime};base64,{b64}" alt="{_e(caption)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>"
        )
    if not figs:
        return '<p class="small">No figures.</p>'
    return "".join(figs)


_HOW_TO_READ = """
<ul>
<li><strong>Labels and scores.</strong> Members are the model's training points, non-members
points it never saw. Every attack gives each point a score; a higher score means
&ldquo;more likely a member&rdquo; (the table of conventions says how each attack's statistic
was oriented, e.g. a larger counterfactual distance means member, Pawelczyk et al. 2023 eq. 3).</li>
<li><strong>TPR at a fixed FPR.</strong> The false-positive rate (FPR) is the share of
non-members wrongly flagged as members; the true-positive rate (TPR) is the share of members
correctly identified. &ldquo;TPR at FPR 0.01&rdquo; is the <em>largest TPR among the points of
the ROC curve whose FPR is at most 0.01</em>, with no interpolation between points; the FPR
that point actually achieves is shown in brackets. Random guessing gives TPR = FPR. With
fewer than 1/FPR non-members the smallest non-zero FPR the data can show is larger than the
target, so such cells are marked unreliable. This low-FPR reading is the one advocated by
Carlini et al. (LiRA) and used by Pawelczyk et al. 2023: an attack that identifies even a few members
with high confidence is a privacy failure.</li>
<li><strong>AUC</strong> is the area under the ROC curve (ties count one half): the
probability that a random member scores higher than a random non-member. 0.5 is random
guessing. Without leakage, AUC stays within 0.5 &plusmn; 1.96&middot;&radic;((n<sub>1</sub> +
n<sub>0</sub> + 1) / (12&middot;n<sub>1</sub>&middot;n<sub>0</sub>)) about 95% of the time
(Mann&ndash;Whitney null variance; n<sub>1</sub> members, n<sub>0</sub> non-members); the
verdict calls leakage &ldquo;detected&rdquo; when some attack falls outside this band.</li>
<li><strong>Balanced accuracy (BA)</strong> is (TPR + 1 &minus; FPR) / 2 at the <em>best</em>
threshold, i.e. it assumes the attacker knows the optimal threshold, as in Pawelczyk et al. 2023. It is
therefore optimistic for the attacker and never below 0.5.</li>
<li><strong>Theorem 2 bound.</strong> If the recourse is (&epsilon;, 0)-differentially private
in the training data, any attacker's BA is at most 1/2 + (1 &minus; e<sup>&minus;&epsilon;</sup>)/2
(Pawelczyk, Lakkaraju &amp; Neel 2023, Theorem 2). For small &epsilon; this is close to 0.5;
for large &epsilon; it approaches 1 and guarantees nothing.</li>
</ul>
"""


def _title(config: Mapping) -> str:
    bits = [str(config[k]) for k in ("dataset", "model", "recourse") if config.get(k) is not None]
    base = "Membership-inference audit of algorithmic recourse"
    return base + (": " + " / ".join(bits) if bits else "")


def _render(metrics: Mapping, images: Mapping[str, str | Path]) -> str:
    config = _as_mapping(metrics.get("config"))
    model = _as_mapping(metrics.get("model"))
    recourse = _as_mapping(metrics.get("recourse"))
    timing = _as_mapping(metrics.get("timing"))
    attacks = _read_attacks(metrics)
    problems: list[str] = []
    images_html = _images_section(images, problems)
    css, verdict = _verdict(attacks)
    title = _title(config)

    try:
        from recourse_privacy import __version__ as version
    except Exception:  # pragma: no cover - package metadata only
        version = "unknown"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    model_view = dict(model)
    tr, te = _float(model.get("train_accuracy")), _float(model.get("test_accuracy"))
    if tr is not None and te is not None and "generalization_gap" not in model_view:
        model_view["generalization_gap"] = tr - te

    sections = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="small">Generated {_e(stamp)} by recourse-privacy {_e(version)}.</p>',
        f'<div class="verdict {css}">{verdict}</div>',
        "<h2>Configuration</h2>",
        _kv_table(config, {
            "dataset": "dataset", "model": "model", "recourse": "recourse method",
            "attacks": "attacks", "shadow_models": "shadow models",
            "n_members": "members requested", "seed": "seed", "distance": "distance",
        }),
        "<h2>Model</h2>",
        _kv_table(model_view, {
            "train_accuracy": "train accuracy", "test_accuracy": "test accuracy",
            "generalization_gap": "train − test accuracy",
        }),
        '<p class="small">A large gap between train and test accuracy (overfitting) is the '
        "usual driver of membership leakage.</p>",
        "<h2>Recourse</h2>",
        _kv_table(recourse, {
            "method": "method", "validity": "validity (share of counterfactuals that flip the prediction)",
            "mean_l1": "mean L1 cost", "mean_l2": "mean L2 cost",
            "n_invalid": "invalid counterfactuals",
        }),
        "<h2>Attacks</h2>",
        _kv_table(
            {k: metrics[k] for k in ("n_members", "n_nonmembers") if k in metrics},
            {"n_members": "members evaluated", "n_nonmembers": "non-members evaluated"},
        ),
        _attacks_table(attacks),
        "<h3>Conventions of each attack</h3>",
        _conventions_table(attacks),
    ]
    if "dp" in metrics and metrics.get("dp") is not None:
        sections += ["<h2>Differential privacy</h2>", _dp_section(_as_mapping(metrics["dp"]), attacks)]
    sections += [
        "<h2>Figures</h2>",
        images_html,
        "<h2>Warnings</h2>",
        _warnings_section(metrics.get("warnings"), problems),
        "<h2>How to read these numbers</h2>",
        _HOW_TO_READ,
    ]
    if timing:
        sections += ["<h2>Timing</h2>", _kv_table(timing, {"total_seconds": "total seconds"})]
    other = {k: v for k, v in metrics.items() if k not in _KNOWN_TOP}
    if other:
        sections += [
            "<h2>Other results</h2>",
            f"<pre>{_e(json.dumps(other, indent=2, default=str, sort_keys=True))}</pre>",
        ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


def write_html_report(
    metrics: Mapping,
    out_dir: str | Path,
    *,
    images: Mapping[str, str | Path] = _EMPTY,
    filename: str = "report.html",
) -> Path:
    """Write a single self-contained HTML report of an audit and return its path.

    ``metrics`` is the audit's metrics.json content (missing optional keys are
    tolerated); ``images`` maps a caption to a PNG/JPEG/SVG file embedded as a base64
    data URI. The report has no external CSS or JavaScript and escapes every string.
    """
    if not isinstance(metrics, Mapping):
        raise ValueError(f"metrics must be a mapping (the metrics.json content), got {type(metrics).__name__}")
    if not isinstance(images, Mapping):
        raise ValueError(f"images must be a mapping caption -> path, got {type(images).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / filename
    path.write_text(_render(metrics, images), encoding="utf-8")
    return path
