"""A scores-in auditor: epsilon lower bounds from the canary scores of a user's own training run.

The input is one score per canary (higher = "more likely trained on") and whether the canary was
included (``member`` 1) or not (0). Four methods, each a 1 - alpha lower bound with its own
assumptions (``ScoreBound.assumptions``):

* ``clopper_pearson`` (Jagielski et al. 2020): a threshold test chosen on one half of the canaries
  (stratified, random with ``random_state``) and measured on the other;
  :func:`recourse_privacy.dp_audit.bounds.epsilon_lower_bound`.
* ``gdp`` (Nasr et al. 2023): the same split; mu >= Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi), then eps
  at delta on the mu-GDP curve (:mod:`recourse_privacy.dp_audit.fdp`).
* ``one_run`` (Steinke, Nasr and Jagielski 2023): the K highest scores guessed "in", the K lowest
  "out"; correct guesses against Binomial(2K, e^eps / (1 + e^eps)) (their Theorem 5.2 with delta).
* ``one_run_fdp`` (Mahloujifar, Melis and Chaudhuri 2024): the same guesses read through the
  Gaussian trade-off curve; a mu bound, then eps at delta.

K: given (``guesses``), or the best of the halving grid floor(m/2), floor(m/4), ..., 1 with the
Bonferroni correction alpha / (grid size), so the choice of K costs confidence and not validity.
Ties in the scores are broken at random (seeded), never by the order of the rows, which could
carry the labels.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from recourse_privacy.dp_audit.bounds import _errors, _threshold_bounds, epsilon_lower_bound
from recourse_privacy.dp_audit.fdp import gdp_epsilon, gdp_mu_lower_bound, one_run_fdp_mu, steinke_epsilon
from recourse_privacy.errors import InvalidInputError, MissingFileError
from recourse_privacy.metrics.intervals import check_alpha, clopper_pearson
from recourse_privacy.validation import RandomState, as_generator, check_delta, check_positive_int

__all__ = ["METHODS", "ScoreBound", "ScoresAudit", "audit_scores", "guess_grid", "read_scores_csv"]

#: the methods, in the order they are reported
METHODS = ("clopper_pearson", "one_run", "one_run_fdp", "gdp")

#: each group (members, non-members) needs this many canaries: one per half of the split, at least
MIN_PER_GROUP = 2

_ONE_RUN_ASSUMES = (
    "each canary was included in training independently with probability 1/2 before training "
    "(the member column records those coin flips), and the scores were computed after training"
)
_SPLIT_ASSUMES = (
    "each score is an independent run of the mechanism on D (member 0) or D' (member 1): one canary per "
    "training run; with many canaries in one run the rates are not independent trials and the bound is a heuristic"
)

_REFERENCES = {
    "clopper_pearson": "Jagielski, Ullman and Oprea 2020, 'Auditing differentially private machine learning'",
    "one_run": "Steinke, Nasr and Jagielski 2023, 'Privacy auditing with one (1) training run', Theorem 5.2",
    "one_run_fdp": "Mahloujifar, Melis and Chaudhuri 2024, 'Auditing f-differential privacy in one run'",
    "gdp": "Nasr et al. 2023, 'Tight auditing of differentially private machine learning'; Dong, Roth and Su 2022",
}


@dataclass(frozen=True)
class ScoreBound:
    """One method's 1 - alpha lower bound on epsilon (and on mu, for the Gaussian-DP methods).

    ``epsilon_lower_bound`` is None when it cannot be stated: the GDP methods at delta = 0, where
    any mu > 0 means no finite epsilon (``mu_lower_bound`` is the finding). ``selection`` says how
    the test (threshold or K) was chosen, ``assumptions`` what must hold for the bound to be valid,
    ``details`` the counts behind it.
    """

    method: str
    epsilon_lower_bound: float | None
    mu_lower_bound: float | None
    delta: float
    alpha: float
    selection: str
    assumptions: str
    formula: str
    reference: str
    details: dict = field(default_factory=dict)

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    def to_dict(self) -> dict:
        return {**asdict(self), "confidence": self.confidence}


@dataclass(frozen=True)
class ScoresAudit:
    """The four bounds on one set of canary scores (``bounds`` in the order of :data:`METHODS`)."""

    n_canaries: int
    n_members: int
    n_non_members: int
    delta: float
    alpha: float
    guesses: int | None
    seed: int | None
    bounds: tuple[ScoreBound, ...]

    def __getitem__(self, method: str) -> ScoreBound:
        for b in self.bounds:
            if b.method == method:
                return b
        raise KeyError(method)

    def to_dict(self) -> dict:
        head = {k: v for k, v in asdict(self).items() if k != "bounds"}
        return {**head, "methods": {b.method: b.to_dict() for b in self.bounds}}


# ----------------------------------------------------------------------------- input


def read_scores_csv(path, *, option: str = "--scores") -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV with columns ``score`` (a number) and ``member`` (0 or 1); other columns are ignored.

    Every error names the file, the column and the line.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"{option} {str(p)!r}: no such file" + (" (a directory)" if p.is_dir() else ""))
    scores, member = [], []
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInputError(
            f"{option} {str(p)!r} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "save it as UTF-8 (a CSV of numbers needs no other encoding)"
        ) from None
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise InvalidInputError(f"{option} {str(p)!r} is empty; need a header with columns score and member")
        names = [h.strip() for h in header]
        missing = [c for c in ("score", "member") if c not in names]
        if missing:
            raise InvalidInputError(
                f"{option} {str(p)!r} has no column {' or '.join(missing)} (columns: {', '.join(names) or 'none'}); "
                "need score (higher = more likely a member) and member (1 = the canary was in training, 0 = not)"
            )
        i_s, i_m = names.index("score"), names.index("member")
        for line, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) <= max(i_s, i_m):
                raise InvalidInputError(f"{option} {str(p)!r} line {line}: {len(row)} fields, fewer than the header's")
            s, m = row[i_s].strip(), row[i_m].strip()
            try:
                v = float(s)
            except ValueError:
                raise InvalidInputError(
                    f"{option} {str(p)!r} column score, line {line}: {s!r} is not a number"
                ) from None
            if not math.isfinite(v):
                raise InvalidInputError(f"{option} {str(p)!r} column score, line {line}: {s!r} is not a finite number")
            try:
                b = float(m)
            except ValueError:
                b = math.nan
            if b not in (0.0, 1.0):
                raise InvalidInputError(
                    f"{option} {str(p)!r} column member, line {line}: {m!r} must be 0 or 1 "
                    "(1 = the canary was included in training)"
                )
            scores.append(v)
            member.append(int(b))
    return np.asarray(scores, dtype=np.float64), np.asarray(member, dtype=np.int64)


def _check_scores(scores, member) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    m = np.asarray(member).reshape(-1)
    if s.size != m.size:
        raise InvalidInputError(f"score has {s.size} values but member has {m.size}")
    if not np.isfinite(s).all():
        raise InvalidInputError(f"score has {int((~np.isfinite(s)).sum())} NaN or infinite values")
    if not np.isin(m, [0, 1]).all():
        raise InvalidInputError(f"member must be 0 or 1 (1 = included); found {np.unique(m)[:10].tolist()}")
    m = m.astype(np.int64)
    n1, n0 = int(m.sum()), int(m.size - m.sum())
    if n1 < MIN_PER_GROUP or n0 < MIN_PER_GROUP:
        raise InvalidInputError(
            f"member: {n1} canaries with 1 and {n0} with 0; too few canaries: need at least {MIN_PER_GROUP} of "
            "each (one for each half of the split), and hundreds for a bound worth reading"
        )
    return s, m


def guess_grid(n_canaries: int) -> tuple[int, ...]:
    """The K tried when none is given: floor(m/2), floor(m/4), ..., 1 (distinct)."""
    k, out = int(n_canaries) // 2, []
    while k >= 1:
        out.append(k)
        k //= 2
    return tuple(out)


# ----------------------------------------------------------------------------- the split methods


def _split(member: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random stratified half of each group selects, the rest measures: two boolean masks."""
    select = np.zeros(member.size, dtype=bool)
    for g in (0, 1):
        idx = rng.permutation(np.flatnonzero(member == g))
        select[idx[: idx.size // 2]] = True
    return select, ~select


def _mid_gap(selection: np.ndarray, side: str, t: float) -> float:
    """The middle of the gap between ``t`` and the next selection score beyond it: the same test on the
    selection half, which does not put the threshold on a score the measurement half may share."""
    beyond = selection[selection < t] if side == ">=" else selection[selection > t]
    if not np.isfinite(t) or beyond.size == 0:
        return t
    other = beyond.max() if side == ">=" else beyond.min()
    return float((t + other) / 2)


def _split_bounds(s, m, select, measure, delta, alpha) -> tuple[ScoreBound, ScoreBound]:
    """clopper_pearson and gdp: each picks its best test on the selection half, measured on the other."""
    s0, s1 = s[select & (m == 0)], s[select & (m == 1)]
    t0, t1 = s[measure & (m == 0)], s[measure & (m == 1)]
    n0, n1 = t0.size, t1.size
    tests = _threshold_bounds(s0, s1, delta, alpha)
    out = []
    for method in ("clopper_pearson", "gdp"):
        best = None
        for side, t, fp, fn, eps in tests:
            score = eps if method == "clopper_pearson" else gdp_mu_lower_bound(fp, s0.size, fn, s1.size, alpha=alpha)
            i = int(np.argmax(score))
            if best is None or score[i] > best[2]:
                best = (side, float(t[i]), float(score[i]))
        side, threshold, sel = best
        threshold = _mid_gap(np.concatenate([s0, s1]), side, threshold)
        fp, fn = _errors(t0, t1, side, threshold)
        details = {
            "side": side,
            "threshold": threshold,
            "test": f"say member when score {side} {threshold:.6g}",
            "false_positives": fp,
            "false_negatives": fn,
            "n_non_members_measured": n0,
            "n_members_measured": n1,
            "fpr_ci": list(clopper_pearson(fp, n0, alpha)),
            "fnr_ci": list(clopper_pearson(fn, n1, alpha)),
            "selection_value": sel,
        }
        if method == "clopper_pearson":
            eps = float(epsilon_lower_bound(fp, n0, fn, n1, delta=delta, alpha=alpha))
            out.append(
                ScoreBound(
                    method=method,
                    epsilon_lower_bound=eps,
                    mu_lower_bound=None,
                    delta=delta,
                    alpha=alpha,
                    selection="threshold and side chosen on a random half of each group, rates measured on the other half",
                    assumptions=_SPLIT_ASSUMES + "; no assumption on the mechanism's trade-off curve",
                    formula="eps_lb = max(log((1-delta-FPR_hi)/FNR_hi), log((1-delta-FNR_hi)/FPR_hi)), Clopper-Pearson "
                    "upper ends of two-sided 1-alpha intervals (jointly >= 1-alpha)",
                    reference=_REFERENCES[method],
                    details=details,
                )
            )
        else:
            mu = float(gdp_mu_lower_bound(fp, n0, fn, n1, alpha=alpha))
            out.append(_gdp_result(method, mu, delta, alpha, details))
    return tuple(out)


def _gdp_result(method: str, mu: float, delta: float, alpha: float, details: dict) -> ScoreBound:
    eps = gdp_epsilon(mu, delta)
    if math.isinf(eps):
        eps = None
        details = {
            **details,
            "note": "delta = 0: a mu-GDP mechanism with mu > 0 is not eps-DP for any finite eps; give delta > 0",
        }
    if method == "gdp":
        selection = (
            "threshold and side chosen on a random half of each group (the largest mu), measured on the other half"
        )
        assumes = _SPLIT_ASSUMES + (
            "; and the mechanism's trade-off curve is Gaussian (mu-GDP), as for the Gaussian mechanism and "
            "(asymptotically) DP-SGD: without it the mu bound holds but its eps is not a bound on eps"
        )
        formula = (
            "mu_lb = Phi^-1(1-FPR_hi) - Phi^-1(FNR_hi) (Clopper-Pearson upper ends, jointly >= 1-alpha); eps at delta "
            "solves delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)"
        )
    else:
        selection = details.pop("selection")
        assumes = _ONE_RUN_ASSUMES + (
            "; and the mechanism is f-DP in each canary for a Gaussian f (mu-GDP): the refuted claim is 'mu-GDP', "
            "so the eps it gives bounds eps only for mechanisms whose trade-off curve is Gaussian"
        )
        formula = (
            "the largest mu for which the recursion of Mahloujifar et al. (2024) makes P[correct >= c] >= alpha "
            "impossible with k guesses of m canaries; eps at delta on the mu-GDP curve"
        )
    return ScoreBound(
        method=method,
        epsilon_lower_bound=eps,
        mu_lower_bound=mu,
        delta=delta,
        alpha=alpha,
        selection=selection,
        assumptions=assumes,
        formula=formula,
        reference=_REFERENCES[method],
        details=details,
    )


# ----------------------------------------------------------------------------- the one-run methods


def _correct_guesses(member: np.ndarray, order: np.ndarray, k: int) -> int:
    """Correct guesses when the k highest are called members and the k lowest non-members."""
    return int(member[order[-k:]].sum() + (1 - member[order[:k]]).sum())


def _one_run_bounds(s, m, guesses, delta, alpha, rng) -> tuple[ScoreBound, ScoreBound]:
    n = s.size
    order = np.lexsort((rng.random(n), s))  # by score; ties in random order
    grid = (guesses,) if guesses is not None else guess_grid(n)
    a = alpha / len(grid)
    rows = []
    for k in grid:
        c = _correct_guesses(m, order, k)
        rows.append(
            {
                "K": k,
                "n_guesses": 2 * k,
                "n_correct": c,
                "epsilon": steinke_epsilon(n, 2 * k, c, alpha=a, delta=delta),
                "mu": one_run_fdp_mu(n, 2 * k, c, alpha=a),
            }
        )
    if guesses is not None:
        selection = (
            f"K = {guesses} given: the {guesses} highest scores guessed members, the {guesses} lowest non-members"
        )
    else:
        selection = (
            f"the best K of the grid {list(grid)} (K highest guessed members, K lowest non-members), each at "
            f"alpha / {len(grid)} (Bonferroni), so the choice of K keeps the confidence 1 - alpha"
        )
    out = []
    for method, key in (("one_run", "epsilon"), ("one_run_fdp", "mu")):
        best = max(rows, key=lambda r: r[key])
        details = {
            "K": best["K"],
            "n_guesses": best["n_guesses"],
            "n_correct": best["n_correct"],
            "n_canaries": n,
            "alpha_per_K": a,
            "candidates": [{k: r[k] for k in ("K", "n_guesses", "n_correct", key)} for r in rows],
        }
        if method == "one_run":
            out.append(
                ScoreBound(
                    method=method,
                    epsilon_lower_bound=best["epsilon"],
                    mu_lower_bound=None,
                    delta=delta,
                    alpha=alpha,
                    selection=selection,
                    assumptions=_ONE_RUN_ASSUMES + "; no assumption on the mechanism's trade-off curve",
                    formula="the largest eps with P-value < alpha, P = F(v) + 2 m delta max_i (F(v-i) - F(v)) / i, "
                    "F(u) = P[Binomial(r, e^eps/(1+e^eps)) >= u], r = 2K guesses, v correct, m canaries",
                    reference=_REFERENCES[method],
                    details=details,
                )
            )
        else:
            out.append(_gdp_result(method, best["mu"], delta, alpha, {**details, "selection": selection}))
    return tuple(out)


# ----------------------------------------------------------------------------- the auditor


def audit_scores(
    scores,
    member,
    *,
    guesses: int | None = None,
    delta: float = 1e-5,
    alpha: float = 0.05,
    random_state: RandomState = 0,
) -> ScoresAudit:
    """Four 1 - ``alpha`` lower bounds on epsilon at ``delta`` from canary ``scores`` and ``member`` (0/1).

    ``guesses`` (K): the one-run methods guess the K highest scores in and the K lowest out; None
    tries the halving grid :func:`guess_grid` with a Bonferroni correction. ``random_state`` seeds
    the split of the Clopper-Pearson and GDP methods and the breaking of ties.
    """
    s, m = _check_scores(scores, member)
    alpha = check_alpha(alpha)
    delta = check_delta(delta, "delta (--delta)")
    if guesses is not None:
        guesses = check_positive_int(guesses, "guesses (--guesses)")
        if 2 * guesses > s.size:
            raise InvalidInputError(
                f"guesses (--guesses) {guesses}: the {guesses} highest and {guesses} lowest scores need "
                f"{2 * guesses} canaries; there are {s.size}"
            )
    seed = random_state if isinstance(random_state, (int, np.integer)) else None
    rng = as_generator(random_state)
    select, measure = _split(m, rng)
    cp, gdp = _split_bounds(s, m, select, measure, delta, alpha)
    one, fdp = _one_run_bounds(s, m, guesses, delta, alpha, rng)
    return ScoresAudit(
        n_canaries=int(s.size),
        n_members=int(m.sum()),
        n_non_members=int(s.size - m.sum()),
        delta=delta,
        alpha=alpha,
        guesses=guesses,
        seed=None if seed is None else int(seed),
        bounds=(cp, one, fdp, gdp),
    )
