"""Growing Spheres (Laugel et al. 2017): random search in growing shells, for all points at once.

The shell search here is shared with CCHVAE (:mod:`recourse_privacy.recourse.cchvae`), which runs
the same loop in a VAE's latent space instead of the input space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from recourse_privacy.hyperparams import Bool, Float, Int
from recourse_privacy.recourse.base import (
    NORM_ORD,
    RecourseResult,
    SearchOutput,
    check_norm,
    generate_recourse,
)
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.validation import (
    check_matrix,
    check_positive_float,
    check_positive_int,
    derive_seed,
)

#: candidates evaluated per model call at most (rows x samples), which bounds memory
MAX_CANDIDATES = 1 << 17
#: the same for a screen that builds no candidates (Growing Spheres' shifted logits): its per-shell
#: products are then shared by more rows; (rows x samples) float64 logits of 32 MiB at most
SCREENED_CANDIDATES = 1 << 22


class ShellSearch(NamedTuple):
    """What :func:`shell_search` found: per row, the counterfactual (the factual where none), whether one was found,
    the (1-based) shell where (-1: never), and how many shells a floor proved empty and skipped."""

    counterfactuals: np.ndarray
    found: np.ndarray
    n_iter: np.ndarray
    skipped: np.ndarray


#: rows per thread at least before :func:`shell_search` splits its rows among threads
SPLIT_ROWS = 32
#: ``floor(rows, radius) -> proven (m,)``: see :func:`shell_search`
Floor = Callable[[np.ndarray, float], np.ndarray]
#: ``screen(rows, offsets) -> (logits (m, s), bound (m,) or (m, s)) | None``: see :func:`shell_search`
Screen = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray] | None"]


def search_seed(random_state) -> int:
    """The base seed of one search: from an int, reproducibly; a Generator is advanced once; None is fresh."""
    return derive_seed(random_state, 0)


def world_seed(random_state, X: np.ndarray, y=None) -> int:
    """A seed for one world (the owner's, or one shadow model's): ``random_state`` mixed with a fingerprint of its training rows.

    ``fit_for`` fits a copy of the method in each world, so each world searches with its own
    independent draws (as separate deployments would), reproducibly, and identically whether
    shadows run in sequence, in parallel processes or from a cache (the pattern of
    :class:`~recourse_privacy.defenses.laplace.SimulatedLaplaceRecourse`).
    """
    import zlib

    tag = zlib.crc32(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    if y is not None:
        tag = zlib.crc32(np.ascontiguousarray(y, dtype=np.int64).tobytes(), tag)
    return derive_seed(random_state, tag)


def shell_draws(seed: int, shell: int, n_samples: int, dim: int, p: int, step: float) -> np.ndarray:
    """``n_samples`` offsets of p-norm in [shell * step, (shell + 1) * step), shape (n_samples, dim).

    ``p`` is the norm's order, 1 or 2 (``NORM_ORD[norm]`` for a method's ``norm``).
    Directions are uniform on the unit p-sphere (normalised Gaussian for p = 2, normalised
    Laplace for p = 1); the radius is uniform on the shell's interval, as in CARLA's
    ``hyper_sphere_coordindates``. The draws depend only on ``(seed, shell)``: every row of a
    batch is searched with the same offsets, which makes the search of a row independent
    of the other rows in its batch (common random numbers).
    """
    rng = np.random.default_rng(derive_seed(seed, shell))
    g = rng.standard_normal((n_samples, dim)) if p == 2 else rng.laplace(size=(n_samples, dim))
    norm = np.linalg.norm(g, ord=p, axis=1, keepdims=True)
    norm[norm == 0] = 1.0
    radius = (shell + rng.random((n_samples, 1))) * step
    return g / norm * radius


def shell_search(
    X: np.ndarray,
    centers: np.ndarray,
    candidates: Callable[[np.ndarray, np.ndarray], np.ndarray],
    model,
    *,
    n_samples: int,
    norm: str,
    step: float,
    max_iter: int,
    seed: int,
    max_candidates: int = MAX_CANDIDATES,
    screen: Screen | None = None,
    floor: Floor | None = None,
) -> ShellSearch:
    """Search growing shells around ``centers`` until each row has a valid candidate.

    ``candidates(rows, points)`` maps search-space points ``points`` (m, s, k) around the
    centers of ``rows`` to feasible input-space candidates (m, s, d); it is the one place where
    candidates are built. For each shell, all rows still searching are scored at once (chunked
    to ``max_candidates`` per block); a row stops at the first shell holding a candidate the
    model accepts and keeps the accepted candidate closest to its factual in the input-space
    ``norm`` ("l1" or "l2", also the norm of the shells). Returns a :class:`ShellSearch`: rows
    never accepted keep their factual, ``found`` False and ``n_iter`` -1; ``n_iter`` is the
    (1-based) shell where recourse was found.

    ``screen(rows, offsets)``, where given, returns the model's logits (m, s) at the
    candidates of ``rows`` for the shell's ``offsets`` computed a cheaper way, with bounds
    (m,) or (m, s) on their difference to the model's own logits, or None (score the candidates
    themselves). Only the candidates it cannot rule out (a logit within its bound of
    acceptance) are built and scored by the model itself, so the result is the one of scoring
    every candidate: Growing Spheres screens with
    :meth:`~recourse_privacy.models.base.BaseClassifier.shifted_logits`, C-CHVAE with
    :meth:`~recourse_privacy.models.base.BaseClassifier.affine_logits`.

    ``floor(rows, radius)``, where given, returns True for the rows whose ball of ``radius`` (around
    their center, in the search's norm) is proven to hold no candidate the model accepts; a row skips
    every shell inside such a ball without drawing its candidates into the model, and is asked again
    at the next shell until the proof first fails (the balls only grow). C-CHVAE proves it with
    :func:`~recourse_privacy.recourse.shell_certificate.decoded_rejection_floor`. The result is the one
    of scoring every shell.

    The rows are searched in as many Python threads as torch has threads when the search starts
    (each in one torch thread: many small blocks, no waiting on a core another process or thread
    holds; the floor's products run in torch too, not in numpy's BLAS). A
    row's draws and result do not depend on the other rows, so the threads split the rows (every
    ``threads``-th row to one) and the result is the one of a single loop. Inside an audit's worlds,
    which run with one torch thread each, the search runs in one.
    """
    import contextvars

    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    p = NORM_ORD[check_norm(norm)]
    threads = min(torch.get_num_threads(), len(X) // SPLIT_ROWS)
    loop = lambda rows: _shell_loop(  # noqa: E731
        X, centers, candidates, model, n_samples, p, step, max_iter, seed, max_candidates, screen, floor, rows
    )
    with torch_threads(1):
        if threads <= 1:
            return loop(np.arange(len(X)))
        from concurrent.futures import ThreadPoolExecutor

        parts = [np.arange(k, len(X), threads) for k in range(threads)]
        with ThreadPoolExecutor(threads, thread_name_prefix="shell-search") as pool:
            outs = list(pool.map(lambda rows: contextvars.copy_context().run(loop, rows), parts))
    merged = outs[0]
    for rows, part in zip(parts[1:], outs[1:]):
        for mine, theirs in zip(merged, part):
            mine[rows] = theirs[rows]
    return merged


def _shell_loop(X, centers, candidates, model, n_samples, p, step, max_iter, seed, max_candidates, screen, floor, rows):
    """The loop of :func:`shell_search` (``p``: the norm's order) over ``rows``; the other rows keep their factual."""
    n = len(X)
    X_cf = X.copy()
    found = np.zeros(n, dtype=bool)
    n_iter = np.full(n, -1, dtype=np.int64)
    skipped = np.zeros(n, dtype=np.int64)
    active = np.asarray(rows)
    provable = np.full(n, floor is not None)  # rows whose next ball may still be proven empty
    chunk = max(1, max_candidates // n_samples)
    for shell in range(max_iter):
        if not len(active):
            break
        todo = active
        asked = active[provable[active]]
        if len(asked):
            proven = floor(asked, (shell + 1) * step)  # the shell's samples lie within this radius
            provable[asked[~proven]] = False
            skipped[asked[proven]] += 1
            todo = active[~provable[active]]
            if not len(todo):
                continue
        offsets = shell_draws(seed, shell, n_samples, centers.shape[1], p, step)
        hit = np.zeros(len(todo), dtype=bool)
        for lo in range(0, len(todo), chunk):
            rows = todo[lo : lo + chunk]
            r, j, cand = _accepted(X, centers, candidates, model, rows, offsets, screen)
            # per row, the accepted candidate closest to the factual; ties: the first sample (argmin's rule)
            dist = np.linalg.norm(cand - X[rows[r]], ord=p, axis=1)
            order = np.lexsort((j, dist, r))
            first = order[np.r_[True, r[order][1:] != r[order][:-1]]] if len(order) else order
            X_cf[rows[r[first]]] = cand[first]
            hit[lo + r[first]] = True
        found[todo[hit]] = True
        n_iter[todo[hit]] = shell + 1
        active = active[~found[active]]
    return ShellSearch(X_cf, found, n_iter, skipped)


def _accepted(X, centers, candidates, model, rows, offsets, screen):
    """The candidates of one block that the model accepts: ``(r, j, cand)``, row (index into ``rows``), sample, point.

    Without a screen every candidate is built and scored (``model.search_logits``). With one,
    only the candidates its error bound cannot rule out are built (``candidates`` on those
    (row, sample) pairs) and scored by the model itself: the same accepted set.
    """
    fast = screen(rows, offsets) if screen is not None else None
    score = getattr(model, "search_logits", model.decision_function)  # a protocol-only model has decision_function
    if fast is None:
        cand = candidates(rows, centers[rows, None, :] + offsets[None]).reshape(-1, X.shape[1])  # (m * s, d)
        ok = np.flatnonzero(score(cand) >= 0)
        r, j = np.divmod(ok, len(offsets))
        return r, j, cand[ok]
    logits, bound = fast  # bound: one per row (m,) or per candidate (m, s)
    r, j = np.nonzero(logits >= -(bound if bound.ndim == 2 else bound[:, None]))
    cand = candidates(rows[r], centers[rows[r], None, :] + offsets[j, None, :])[:, 0]  # (pairs, d)
    ok = score(cand) >= 0
    return r[ok], j[ok], cand[ok]


@register_recourse(
    "gs",
    description="Growing Spheres (Laugel et al.): random search in growing L2 (or L1) shells, batched",
    needs=("fitting_data",),
    cost=30,
)
class GrowingSpheres:
    """Growing Spheres (Laugel et al. 2017; Pawelczyk et al. 2023, Appendix C.2), batched over all points.

    For shell k = 0, 1, ... (radii [k * step, (k + 1) * step) in the ``norm``), sample
    ``n_search_samples`` points around every factual still without recourse, and stop a row
    at the first shell where the model accepts a sample, keeping the accepted sample
    closest to the factual. Defaults are CARLA's ``growing_spheres``: 1,000 samples, L2,
    step 0.2, 1,000 shells at most (CARLA's loop ignores its own limit; here a row with no
    recourse after ``max_iter`` shells keeps its factual and is flagged invalid).
    ``norm="l1"`` samples in L1 shells (the L1 ball of Pawelczyk et al. 2023, Appendix C.2).

    ``action_set``: immutable features are never sampled (the search runs in the mutable
    coordinates only); increase-only features take the absolute value of their offset (a
    reflection, which keeps the sample in its shell); bounds clip. ``feature_selection``
    runs Laugel et al.'s sparsification step after the search (reset changed features to
    the factual's value, smallest change first, while the model still accepts); CARLA does
    not, so it is off by default. Points the model already accepts are returned unchanged.

    Draws come from ``random_state``; after :meth:`fit` (which ``fit_for`` calls in each
    world of the audit) from ``random_state`` and a fingerprint of that world's training
    rows, so the owner's and each shadow model's searches are independent and reproducible.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "n_search_samples": Int(1, 10**7),
        "step": Float(0, 1e6, low_open=True),
        "max_iter": Int(1, 10**7),
        "feature_selection": Bool(),
    }

    def __init__(
        self,
        *,
        n_search_samples: int = 1000,
        norm: str = "l2",
        step: float = 0.2,
        max_iter: int = 1000,
        feature_selection: bool = False,
        action_set: ActionSet | None = None,
        random_state=None,
    ):
        self.n_search_samples = check_positive_int(n_search_samples, "n_search_samples")
        self.norm = check_norm(norm)
        self.step = check_positive_float(step, "step")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.feature_selection = bool(feature_selection)
        self.action_set = action_set
        self.random_state = random_state

    def fit(self, X: np.ndarray, y=None, model=None) -> GrowingSpheres:
        """Nothing to learn: only seeds this world's search from ``random_state`` and the rows (see :func:`world_seed`)."""
        self.seed_ = world_seed(self.random_state, check_matrix(X), y)
        return self

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X``; rows without recourse keep their factual, flagged invalid."""
        return generate_recourse(
            self,
            model,
            X,
            skip_accepted=True,
            info={
                "n_search_samples": self.n_search_samples,
                "norm": self.norm,
                "step": self.step,
                "max_iter": self.max_iter,
                "feature_selection": self.feature_selection,
            },
        )

    def _begin(self, model) -> int:
        """This call's search seed (after :meth:`fit`, this world's)."""
        return search_seed(getattr(self, "seed_", self.random_state))

    def _search(self, model, X: np.ndarray, seed: int) -> SearchOutput:
        """The shell search in the mutable coordinates of the rows of ``X`` (all rejected by the model)."""
        aset = self.action_set or ActionSet.unconstrained(X.shape[1])
        mutable = np.flatnonzero(aset.mutable)
        if not len(mutable):  # nothing may move: no recourse
            return SearchOutput(X.copy(), np.full(len(X), -1, dtype=np.int64))

        def candidates(rows, points):
            x = X[rows, None, :]
            out = np.broadcast_to(x, points.shape[:2] + (X.shape[1],)).copy()
            delta = points - x[..., mutable]
            delta = np.where(aset.increasing[mutable], np.abs(delta), delta)
            out[..., mutable] = x[..., mutable] + delta
            return aset.project(out, x)

        screen = _shifted_screen(model, X) if self.action_set is None else None
        X_cf, _, n_iter, _ = shell_search(
            X,
            X[:, mutable],
            candidates,
            model,
            n_samples=self.n_search_samples,
            norm=self.norm,
            step=self.step,
            max_iter=self.max_iter,
            seed=seed,
            screen=screen,
            max_candidates=MAX_CANDIDATES if screen is None else SCREENED_CANDIDATES,
        )
        if self.feature_selection:
            X_cf = select_features(model, X, X_cf, n_iter > 0)
        return SearchOutput(X_cf, n_iter)


def _shifted_screen(model, X: np.ndarray) -> Screen | None:
    """Growing Spheres' screen without an action set (candidates ``X[rows] + offsets``): the model's ``shifted_logits``."""
    shifted = getattr(model, "shifted_logits", None)
    if shifted is None:
        return None
    return lambda rows, offsets: shifted(X[rows], offsets)


def select_features(model, X: np.ndarray, X_cf: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Laugel et al.'s feature selection: per row, reset changed features to the factual, smallest change first, while still accepted.

    One model call per feature position, each over all ``rows`` at once.
    """
    out = X_cf.copy()
    idx = np.flatnonzero(rows)
    if not len(idx):
        return out
    order = np.argsort(np.abs(X_cf[idx] - X[idx]), axis=1, kind="stable")
    for j in range(X.shape[1]):
        cols = order[:, j]
        trial = out[idx].copy()
        trial[np.arange(len(idx)), cols] = X[idx, cols]
        ok = model.predict(trial) == 1
        out[idx[ok]] = trial[ok]
    return out
