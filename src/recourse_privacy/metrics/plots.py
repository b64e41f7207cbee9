"""Figures for membership-inference audits: log-log ROC curves and score histograms.

matplotlib is imported only inside the functions. Figures are built with
``matplotlib.figure.Figure`` and rendered by the Agg canvas, so no display is needed
and the caller's pyplot backend / figure registry is left untouched.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from recourse_privacy.metrics.membership import (
    LowFprWarning,
    _tpr_at_fpr_from_curve,
    _validate,
    auc,
    roc,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = [
    "plot_roc_loglog",
    "plot_score_histogram",
    "roc_loglog_figure",
    "score_histogram_figure",
]

_DPI = 150


def plain_text(text: str) -> str:
    """``text`` with ``$`` escaped, so matplotlib shows it as written instead of parsing ``$...$`` as math."""
    return str(text).replace("\\$", "$").replace("$", "\\$")


def title_lines(text: str, width: int = 56) -> str:
    """A figure title as :func:`plain_text`, wrapped at ``width`` characters (a long model label, say a pipeline's
    steps, would run past the figure's edge)."""
    import textwrap

    return plain_text(textwrap.fill(str(text), width, break_on_hyphens=False))


def _new_figure(figsize: tuple[float, float]) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=_DPI)
    return out


def roc_loglog_figure(curves: Mapping[str, tuple[ArrayLike, ArrayLike]], *, title: str = "") -> Figure:
    """Build (without saving) the log-log ROC figure used by :func:`plot_roc_loglog`.

    Both axes run from min(1e-3, 1/largest n_nonmembers) to 1. ROC points with FPR or
    TPR below that floor (e.g. FPR = 0) are drawn on the floor so the curve reaches
    the axis; the dashed diagonal is random guessing.
    """
    if not curves:
        raise ValueError("curves must name at least one attack: {name: (labels, scores)}")
    prepared = []
    max_n0 = 1
    for name, pair in curves.items():
        try:
            labels, scores = pair
        except (TypeError, ValueError):
            raise ValueError(f"curves[{name!r}] must be a (labels, scores) pair") from None
        y, s = _validate(labels, scores)
        n0 = int((y == 0).sum())
        max_n0 = max(max_n0, n0)
        curve = roc(y, s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LowFprWarning)
            t01 = _tpr_at_fpr_from_curve(curve, 0.01, n0)
        prepared.append((str(name), curve, auc(y, s), t01))

    lo = min(1e-3, 1.0 / max_n0)
    fig = _new_figure((5.5, 5.0))
    ax = fig.add_subplot(1, 1, 1)
    for name, curve, a, t01 in prepared:
        flag = "" if t01.reliable else " (few non-members)"
        label = f"{plain_text(name)}  AUC {a:.2f}, TPR@1%FPR {t01.tpr:.3g}{flag}"
        ax.plot(
            np.clip(curve.fpr, lo, 1.0),
            np.clip(curve.tpr, lo, 1.0),
            linewidth=1.5,
            label=label,
        )
    ax.plot([lo, 1.0], [lo, 1.0], linestyle="--", color="grey", linewidth=1.0, label="random guessing")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.0)
    ax.set_xlabel("false positive rate (non-members flagged)")
    ax.set_ylabel("true positive rate (members identified)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title_lines(title))
    return fig


def plot_roc_loglog(
    curves: Mapping[str, tuple[ArrayLike, ArrayLike]],
    path: str | Path,
    *,
    title: str = "",
) -> Path:
    """Save log-log ROC curves of several attacks as a PNG (dpi 150); return the path.

    ``curves`` maps attack name -> (labels, scores) with labels 1 = member and scores
    higher = more likely member. The legend gives each attack's AUC and TPR at 1% FPR.
    """
    fig = roc_loglog_figure(curves, title=title)
    return _save(fig, path)


def _spike(values: np.ndarray) -> tuple[float, int] | None:
    """The most frequent exact value and its count, if it holds at least 5% (and 5) of the values."""
    uniq, counts = np.unique(values, return_counts=True)
    i = int(np.argmax(counts))
    c = int(counts[i])
    return (float(uniq[i]), c) if c >= max(5, 0.05 * values.size) else None


def score_histogram_figure(
    member_values: ArrayLike,
    nonmember_values: ArrayLike,
    *,
    xlabel: str = "counterfactual distance",
    log: bool = True,
    title: str = "",
) -> Figure:
    """Build (without saving) the member vs non-member histogram of :func:`plot_score_histogram`.

    Bars are counts (not densities) on shared bins, so a spike, e.g. many targets with the
    identical distance of Laplace Recourse's clamp, stands out; the most frequent exact value
    is named in the title when it holds at least 5% of the values. Non-finite values are
    dropped and counted in the title. With ``log=True`` and all values > 0 the first panel
    (``fig.axes[0]``) has log-spaced bins on a log x axis and a second panel shows the same
    values on a linear x axis; otherwise one panel of linear bins is drawn and, if log was
    requested, the title says why.
    """
    m, n, notes = _finite_values(member_values, nonmember_values)
    both = np.concatenate([m, n])
    lo, hi = float(both.min()), float(both.max())
    n_bins = int(np.clip(np.sqrt(both.size), 10, 60))
    use_log = bool(log and lo > 0)
    if log and not use_log:
        notes.append("linear bins: non-positive values present")
    spike = _spike(both)
    if spike is not None and hi > lo:
        notes.append(f"{spike[1]} of {both.size} values are exactly {spike[0]:.4g}")
    a, b = (lo - 0.5, hi + 0.5) if hi <= lo else (lo, hi)
    linear_bins = np.linspace(a, b, n_bins + 1)

    def draw(ax, bins: np.ndarray) -> None:
        ax.hist(n, bins=bins, alpha=0.55, color="tab:blue", label=f"non-members (n={n.size})")
        ax.hist(m, bins=bins, alpha=0.55, color="tab:orange", label=f"members (n={m.size})")
        ax.set_xlabel(plain_text(xlabel))
        ax.set_ylabel("count")

    if use_log:
        a, b = (lo / 1.5, hi * 1.5) if hi <= lo else (lo, hi)
        fig = _new_figure((9.0, 3.6))
        ax = fig.add_subplot(1, 2, 1)
        draw(ax, np.geomspace(a, b, n_bins + 1))
        _log_axis(ax, b / a)
        ax_lin = fig.add_subplot(1, 2, 2)
        draw(ax_lin, linear_bins)
        ax_lin.set_title("linear x axis", fontsize=9)
        ax_lin.legend(fontsize=8)
    else:
        fig = _new_figure((6.0, 3.6))
        ax = fig.add_subplot(1, 1, 1)
        draw(ax, linear_bins)
        ax.legend(fontsize=8)
    full_title = title
    if notes:
        full_title = (title + " " if title else "") + "(" + "; ".join(notes) + ")"
    if full_title:
        if use_log:
            fig.suptitle(title_lines(full_title, 90), fontsize=10)
        else:
            ax.set_title(title_lines(full_title), fontsize=10)
    return fig


def _finite_values(member_values: ArrayLike, nonmember_values: ArrayLike) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The finite member and non-member values (each must hold one), and a note counting the dropped ones."""
    m = np.asarray(member_values, dtype=np.float64).ravel()
    n = np.asarray(nonmember_values, dtype=np.float64).ravel()
    notes = []
    dropped = int((~np.isfinite(m)).sum() + (~np.isfinite(n)).sum())
    m, n = m[np.isfinite(m)], n[np.isfinite(n)]
    if m.size == 0:
        raise ValueError("member_values must contain at least one finite value")
    if n.size == 0:
        raise ValueError("nonmember_values must contain at least one finite value")
    if dropped:
        notes.append(f"{dropped} non-finite value(s) omitted")
    return m, n, notes


def _log_axis(ax, span: float) -> None:
    """A log x axis titled so; over a few decades (``span`` = max / min < 1000) plain-number ticks, since the
    default log ticks overlap or vanish there."""
    ax.set_xscale("log")
    if span < 1000:
        from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=5) if span < 10 else LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_title("log x axis", fontsize=9)


def plot_score_histogram(
    member_values: ArrayLike,
    nonmember_values: ArrayLike,
    path: str | Path,
    *,
    xlabel: str = "counterfactual distance",
    log: bool = True,
    title: str = "",
) -> Path:
    """Save overlaid member / non-member histograms (counts, shared bins) as a PNG.

    As in Pawelczyk et al. 2023, Figure 2a: log-spaced bins on a log x axis when ``log``
    and all values are > 0 (with a second, linear-axis panel beside it), else linear bins
    (noted in the title). Counts rather than densities keep a spike of identical values
    visible. Returns the path.
    """
    fig = score_histogram_figure(member_values, nonmember_values, xlabel=xlabel, log=log, title=title)
    return _save(fig, path)
