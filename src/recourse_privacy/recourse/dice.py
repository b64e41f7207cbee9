"""DiCE-style diverse counterfactuals (Mothilal, Sharma and Tan 2020), gradient method, batched."""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.hyperparams import Bool, Float, Int
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.recourse.scfe import compact_adam
from recourse_privacy.validation import (
    as_generator,
    check_matrix,
    check_positive_float,
    check_positive_int,
)

FEATURE_WEIGHTS = ("inverse_mad", "unit")


@register_recourse(
    "dice",
    description="Mothilal et al. DiCE: k diverse counterfactuals (hinge + proximity - DPP), batched",
    needs=("gradients", "fitting_data"),
    cost=30,
)
class DiverseCounterfactuals:
    """Mothilal et al.'s DiCE: ``total_cfs`` counterfactuals per point from one gradient objective.

    For a query x and counterfactuals c_1..c_k (Mothilal et al. 2020, eq. 4, as dice-ml's
    ``DicePyTorch``)::

        L = 1/k sum_i hinge(f(c_i))  +  proximity_weight * 1/(k d) sum_i dist(c_i, x)
            - diversity_weight * det(K),   K_ab = 1 / (1 + dist(c_a, c_b))  (+1e-4 on the diagonal)

    with hinge(z) = max(0, 1 - z) on the favourable logit and dist the L1 distance weighted
    by the inverse median absolute deviation of each feature (1 for binary features). As in
    dice-ml, the search runs in min-max normalised coordinates of the training data (set by
    :meth:`fit`), the k counterfactuals start at x + 0.01 i, Adam with learning rate 0.05
    updates them, every iterate is clipped to the training range, and a point stops once it
    has run ``min_iter`` steps, its loss changed by at most ``loss_diff_thresh`` and all its
    counterfactuals are accepted (at most ``max_iter`` steps); if the last set is not all
    valid, the best all-valid set met on the way (mean probability closest to the threshold)
    is returned. A post-hoc pass then moves each continuous feature that changed by less than
    the ``posthoc_sparsity_param`` quantile of its deviations (capped at its MAD) back toward
    x while the counterfactual stays valid (dice-ml's linear search, here on a grid of
    ``posthoc_steps`` steps instead of the feature's decimal precision).

    All points run at once as an (n, k, d) tensor; the loss is a sum of per-point terms and
    Adam is elementwise, so each point follows the trajectory it would have alone; finished
    points leave the batch with their Adam state. ``action_set``: immutable features are
    frozen (dice-ml's ``features_to_vary``), and every iterate is projected on the action set
    (increase-only features and ranges, which dice-ml's gradient method does not have).
    ``counterfactuals`` holds, per point, the closest valid counterfactual in the weighted
    distance (the closest one, flagged invalid, when none is valid); ``info["diverse"]`` all
    k of them (n, k, d) and ``info["diverse_valid"]`` their validity (n, k).
    Not done: dice-ml's categorical penalty and one-hot rounding (our encoded features carry
    no group structure) and its rounding of continuous features to their data precision.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "total_cfs": Int(1, 1000),
        "proximity_weight": Float(0, 1e6),
        "diversity_weight": Float(0, 1e6),
        "learning_rate": Float(0, 100, low_open=True),
        "min_iter": Int(0, 10**7),
        "max_iter": Int(1, 10**7),
        "loss_diff_thresh": Float(0, 1e6),
        "loss_converge_maxiter": Int(1, 10**6),
        "stopping_threshold": Float(0, 1, low_open=True, high_open=True),
        "init_near_query": Bool(),
        "posthoc_sparsity_param": Float(0, 1e6, optional=True),
        "posthoc_steps": Int(0, 10**6),
        "batch_size": Int(1, 10**7, optional=True),
    }

    def __init__(
        self,
        *,
        total_cfs: int = 4,
        proximity_weight: float = 0.5,
        diversity_weight: float = 1.0,
        learning_rate: float = 0.05,
        min_iter: int = 500,
        max_iter: int = 5000,
        loss_diff_thresh: float = 1e-5,
        loss_converge_maxiter: int = 1,
        stopping_threshold: float = 0.5,
        init_near_query: bool = True,
        feature_weights: str = "inverse_mad",
        posthoc_sparsity_param: float | None = 0.1,
        posthoc_steps: int = 20,
        action_set: ActionSet | None = None,
        batch_size: int | None = None,
        random_state=None,
    ):
        self.total_cfs = check_positive_int(total_cfs, "total_cfs")
        if proximity_weight < 0 or diversity_weight < 0:
            raise InvalidInputError(
                f"proximity_weight and diversity_weight must be >= 0; got {proximity_weight!r}, {diversity_weight!r}"
            )
        self.proximity_weight = float(proximity_weight)
        self.diversity_weight = float(diversity_weight)
        self.learning_rate = check_positive_float(learning_rate, "learning_rate")
        self.min_iter = check_positive_int(min_iter, "min_iter", minimum=0)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.loss_diff_thresh = float(loss_diff_thresh)
        self.loss_converge_maxiter = check_positive_int(loss_converge_maxiter, "loss_converge_maxiter")
        if not 0 < stopping_threshold < 1:
            raise InvalidInputError(f"stopping_threshold must be in (0, 1); got {stopping_threshold!r}")
        self.stopping_threshold = float(stopping_threshold)
        self.init_near_query = bool(init_near_query)
        if feature_weights not in FEATURE_WEIGHTS:
            raise InvalidInputError(f"feature_weights must be one of {FEATURE_WEIGHTS}; got {feature_weights!r}")
        self.feature_weights = feature_weights
        if posthoc_sparsity_param is not None and not 0 <= posthoc_sparsity_param <= 1:
            raise InvalidInputError(f"posthoc_sparsity_param must be in [0, 1] or None; got {posthoc_sparsity_param!r}")
        self.posthoc_sparsity_param = posthoc_sparsity_param
        self.posthoc_steps = check_positive_int(posthoc_steps, "posthoc_steps")
        self.action_set = action_set
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X: np.ndarray, y: np.ndarray | None = None, model=None) -> DiverseCounterfactuals:
        """Learn what dice-ml reads from the training data: ranges, MADs and the post-hoc quantiles."""
        X = check_matrix(X)
        if len(X) < 2:
            raise InvalidInputError("DiverseCounterfactuals.fit needs at least 2 training rows")
        self.lower_, self.upper_ = X.min(axis=0), X.max(axis=0)
        scale = self.upper_ - self.lower_
        self.scale_ = np.where(scale > 0, scale, 1.0)
        n_unique = (np.diff(np.sort(X, axis=0), axis=0) != 0).sum(axis=0) + 1
        self.continuous_ = n_unique > 2
        Xn = (X - self.lower_) / self.scale_
        mad = np.median(np.abs(Xn - np.median(Xn, axis=0)), axis=0)
        mad = np.where(mad > 0, mad, 1.0)
        if self.feature_weights == "inverse_mad":
            self.weights_ = np.where(self.continuous_, np.round(1.0 / mad, 2), 1.0)
        else:
            self.weights_ = np.ones(X.shape[1])
        # post-hoc sparsity thresholds in model units: quantile of |unique values - their median|, capped at the MAD
        thr = np.full(X.shape[1], -np.inf)
        if self.posthoc_sparsity_param:
            raw_mad = mad * self.scale_
            for j in np.flatnonzero(self.continuous_):
                u = np.unique(X[:, j])
                thr[j] = min(np.quantile(np.abs(u - np.median(u)), self.posthoc_sparsity_param), raw_mad[j])
        self.posthoc_thresholds_ = thr
        self.n_features_in_ = X.shape[1]
        return self

    # ------------------------------------------------------------------ generate
    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """k diverse counterfactuals for every row of ``X``; the closest valid one per row in ``counterfactuals``."""
        return generate_recourse(
            self,
            model,
            X,
            info={
                "total_cfs": self.total_cfs,
                "proximity_weight": self.proximity_weight,
                "diversity_weight": self.diversity_weight,
                "learning_rate": self.learning_rate,
                "min_iter": self.min_iter,
                "max_iter": self.max_iter,
            },
        )

    def _check_fitted(self, X: np.ndarray) -> None:
        if not hasattr(self, "weights_"):
            raise NotFittedError(
                "DiverseCounterfactuals needs fit(X_train, y_train, model) first: it reads the "
                "training ranges and MADs (use recourse_privacy.recourse.fit_for)"
            )
        if X.shape[1] != self.n_features_in_:
            raise InvalidInputError(
                f"X has {X.shape[1]} features; DiverseCounterfactuals was fitted on {self.n_features_in_}"
            )

    def _begin(self, model):
        """The torch module and one random generator for all chunks of this call."""
        return model.torch_module(), as_generator(self.random_state)

    def _search(self, model, X: np.ndarray, state) -> SearchOutput:
        """k counterfactuals per row, sparsified; the closest valid one (the closest one where none is)."""
        module, rng = state
        n, d = X.shape
        cfs, n_iter = self._run(module, X, rng)
        cfs = self._posthoc_sparsity(model, X, cfs)
        if self.action_set is not None and self.action_set.structured and n:
            # choose among the projected (valid) rows; where none is accepted, keep the continuous
            # ones, which the driver projects and repairs (generate_recourse)
            projected = self.action_set.project(cfs, X[:, None, :])
            ok = (model.predict(projected.reshape(-1, d)) == 1).reshape(n, -1).any(axis=1)
            ok |= ~(model.predict(cfs.reshape(-1, d)) == 1).reshape(n, -1).any(axis=1)
            cfs = np.where(ok[:, None, None], projected, cfs)
        valid_k = (model.predict(cfs.reshape(-1, d)) == 1).reshape(n, -1) if n else np.zeros((0, self.total_cfs), bool)
        dist = (np.abs(cfs - X[:, None, :]) / self.scale_ * self.weights_).sum(axis=2)
        best = np.argmin(np.where(valid_k, dist, np.inf), axis=1) if n else np.zeros(0, int)
        none_valid = ~valid_k.any(axis=1)
        best[none_valid] = np.argmin(dist[none_valid], axis=1) if none_valid.any() else best[none_valid]
        return SearchOutput(cfs[np.arange(n), best], n_iter, info={"diverse": cfs, "diverse_valid": valid_k})

    def _run(self, module, X: np.ndarray, rng: np.random.Generator):
        import torch

        m, d = X.shape
        k = self.total_cfs
        if not m:
            return np.zeros((0, k, d)), np.zeros(0, dtype=np.int64)
        dtype = next(module.parameters()).dtype
        lo = torch.as_tensor(self.lower_, dtype=dtype)
        sc = torch.as_tensor(self.scale_, dtype=dtype)
        w = torch.as_tensor(self.weights_, dtype=dtype)
        u0 = (torch.as_tensor(X, dtype=dtype) - lo) / sc
        a = self.action_set or ActionSet.unconstrained(d)
        vary = torch.as_tensor(~a.immutable & ~a.held(X))[:, None, :]  # per row: a row's missing values held
        inc = torch.as_tensor(a.increasing)
        ulo, uhi = self._box(a, u0)
        u = torch.where(vary, self._init(u0, k, rng), u0[:, None, :]).requires_grad_(True)
        opt = torch.optim.Adam([u], lr=self.learning_rate)
        thr = self.stopping_threshold if self.stopping_threshold >= 0.5 else 0.75  # dice-ml's rule for class 1
        eye = 1e-4 * torch.eye(k, dtype=dtype)

        out = torch.empty((m, k, d), dtype=dtype)
        n_iter = np.full(m, -1, dtype=np.int64)
        rows = torch.arange(m)
        prev_loss = torch.zeros(m, dtype=dtype)
        loss_diff = torch.ones(m, dtype=dtype)
        conv = torch.zeros(m, dtype=torch.int64)
        backup = u.detach().clone()
        backup_score = torch.full((m,), 100.0, dtype=dtype)
        u0a = u0
        it = 0
        while True:
            z = module((lo + u * sc).reshape(-1, d)).reshape(-1, k)
            p = torch.sigmoid(z.detach())
            all_valid = (p >= thr).all(dim=1)
            if it > 0:  # dice-ml backs up the all-valid set whose mean probability is closest to the threshold
                score = (p - thr).abs().mean(dim=1)
                better = all_valid & (score < backup_score)
                backup[better] = u.detach()[better]
                backup_score[better] = score[better]
            if it >= self.max_iter:
                stop = torch.ones_like(all_valid)
            elif it < self.min_iter:
                stop = torch.zeros_like(all_valid)
            else:
                small = loss_diff <= self.loss_diff_thresh
                conv = torch.where(small, conv + 1, torch.zeros_like(conv))
                stop = small & (conv >= self.loss_converge_maxiter) & all_valid
            if stop.any():
                final = u.detach()[stop]
                use_backup = ~all_valid[stop] & (backup_score[stop] < 100.0)
                final[use_backup] = backup[stop][use_backup]
                out[rows[stop]] = final
                n_iter[rows[stop].numpy()] = it
                keep = ~stop
                if not keep.any():
                    break
                u, opt = compact_adam(u, opt, keep)
                rows, u0a, ulo, uhi, vary = rows[keep], u0a[keep], ulo[keep], uhi[keep], vary[keep]
                prev_loss, loss_diff, conv = prev_loss[keep], loss_diff[keep], conv[keep]
                backup, backup_score = backup[keep], backup_score[keep]
                z = module((lo + u * sc).reshape(-1, d)).reshape(-1, k)
            loss_rows = self._loss(u, u0a, z, w, eye, torch)
            (grad,) = torch.autograd.grad(loss_rows.sum(), u)
            u.grad = grad * vary
            opt.step()
            with torch.no_grad():
                x0 = u0a[:, None, :]
                u.copy_(torch.where(vary, u, x0))
                u.copy_(torch.where(inc, torch.maximum(u, x0), u))
                u.copy_(torch.clamp(u, ulo, uhi))
            loss_rows = loss_rows.detach()
            loss_diff = (loss_rows - prev_loss).abs()
            prev_loss = loss_rows
            it += 1
        # float64: the factual plus the step taken, so features that did not move keep their exact value
        X_cf = X[:, None, :] + (out - u0[:, None, :]).numpy().astype(np.float64) * self.scale_
        if self.action_set is not None:  # continuous here; the structure is applied in _search
            X_cf = self.action_set.actionability.project(X_cf, X[:, None, :])
        return X_cf, n_iter

    def _box(self, a: ActionSet, u0):
        """The permitted range in the scaled space, (m, 1, d) each: dice-ml's training range, or the action
        set's ranges where it has them, widened to hold the query."""
        import torch

        d = u0.shape[1]
        ulo = (
            np.where(np.isfinite(a.lower), (a.lower - self.lower_) / self.scale_, 0.0)
            if self.action_set
            else np.zeros(d)
        )
        uhi = (
            np.where(np.isfinite(a.upper), (a.upper - self.lower_) / self.scale_, 1.0)
            if self.action_set
            else np.ones(d)
        )
        ulo = torch.minimum(torch.as_tensor(ulo, dtype=u0.dtype), u0)[:, None, :]
        uhi = torch.maximum(torch.as_tensor(uhi, dtype=u0.dtype), u0)[:, None, :]
        return ulo, uhi

    def _init(self, u0, k: int, rng: np.random.Generator):
        """The k starting points per query: near the query (``init_near_query``) or uniform in the box."""
        import torch

        m, d = u0.shape
        if self.init_near_query:
            return u0[:, None, :] + 0.01 * torch.arange(k, dtype=u0.dtype)[None, :, None]
        return torch.as_tensor(rng.uniform(0.0, 1.0, size=(m, k, d)), dtype=u0.dtype)

    def _loss(self, u, u0, z, w, eye, torch):
        """Per-point DiCE loss (dice-ml ``compute_loss`` without the categorical penalty)."""
        k, d = u.shape[1], u.shape[2]
        yloss = torch.relu(1.0 - z).mean(dim=1)
        loss = yloss
        if self.proximity_weight > 0:
            prox = ((u - u0[:, None, :]).abs() * w).sum(dim=(1, 2)) / (d * k)
            loss = loss + self.proximity_weight * prox
        if self.diversity_weight > 0 and k > 1:
            pair = ((u[:, :, None, :] - u[:, None, :, :]).abs() * w).sum(dim=3)
            loss = loss - self.diversity_weight * torch.linalg.det(1.0 / (1.0 + pair) + eye)
        return loss

    def _posthoc_sparsity(self, model, X: np.ndarray, cfs: np.ndarray) -> np.ndarray:
        """dice-ml's post-hoc linear search, vectorised over all counterfactuals, one feature at a time."""
        if not self.posthoc_sparsity_param or not len(X):
            return cfs
        n, k, d = cfs.shape
        C = cfs.reshape(-1, d).copy()
        Q = np.repeat(X, k, axis=0)
        ok = model.predict(C) == 1
        thr = self.posthoc_thresholds_
        S = self.posthoc_steps
        frac = np.arange(1, S + 1) / S
        for j in np.argsort(-thr, kind="stable"):
            if not np.isfinite(thr[j]):
                continue
            diff = Q[:, j] - C[:, j]
            idx = np.flatnonzero(ok & (np.abs(diff) <= thr[j]) & (np.abs(diff) > 1e-3))
            if not len(idx):
                continue
            trial = np.repeat(C[idx][:, None, :], S, axis=1)
            trial[:, :, j] = C[idx, j][:, None] + frac[None, :] * diff[idx][:, None]
            v = (model.predict(trial.reshape(-1, d)) == 1).reshape(len(idx), S)
            lead = np.where(v.all(axis=1), S, v.argmin(axis=1))  # steps taken before the first invalid one
            C[idx, j] = np.where(lead == S, Q[idx, j], C[idx, j] + lead / S * diff[idx])
        return C.reshape(n, k, d)
