"""DPM (Huang et al. 2023, sec. 4.2.2): the model itself trained with differential privacy.

Recourse computed from an epsilon-DP model is epsilon-DP by post-processing (Huang et al. 2023,
Theorem 3.4) for any number of recourse queries: the privacy cost is paid once, at training.

- :class:`DPLogisticModel`: objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011,
  Algorithm 2) run by diffprivlib's ``LogisticRegression`` in the paper's own setting: every row,
  with the intercept's constant column appended, is divided by sqrt(data_norm^2 + 1) so that its
  norm is at most 1, and the intercept is a coefficient the L2 term regularises like the others.
  diffprivlib as it is leaves the intercept unregularised and calibrates to rows of norm
  ``data_norm`` without that column, where the paper's proof does not hold (the output's privacy
  loss is unbounded: ``recourse_privacy.dp_audit.objective_perturbation``). Pure epsilon-DP for
  neighbours that replace a row (the paper's theorem) and for neighbours that add or remove one
  (the same proof gives epsilon / 2). ``data_norm`` is a parameter, never read from the data
  (that would leak); a row above it raises a ValueError instead of being clipped silently.
  With ``Preprocessor(normalize_rows=True)`` (``--normalize-rows``) rows have norm 1.
- :class:`DPMLPModel`: the paper's ReLU networks trained with DP-SGD (Abadi et al. 2016)
  through Opacus: per-example gradients clipped to ``max_grad_norm``, Gaussian noise whose
  multiplier Opacus chooses so that ``epochs`` epochs of Poisson-sampled batches reach
  (``epsilon``, ``delta``) under its accountant; the achieved epsilon is ``epsilon_``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Bool, Float, Int, Ints
from recourse_privacy.models.base import LinearClassifier, TorchBackedClassifier
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.validation import check_binary_labels, check_matrix, check_positive_int, derive_seed
from recourse_privacy.validation import check_epsilon as _check_epsilon

#: rows may exceed ``data_norm`` by this relative amount (floating-point rounding of unit rows)
_NORM_TOL = 1e-9


#: DPLogisticModel's default: C raised into Chaudhuri et al.'s Delta branch where epsilon' would lie in (0, epsilon / 2)
REGULARIZE_FOR_BUDGET = True

#: the logistic loss's Lipschitz constant of the gradient (diffprivlib's ``function_sensitivity``)
LOGISTIC_SMOOTHNESS = 0.25


def budget_C(epsilon: float, C: float = 1.0) -> float:
    """The inverse regularisation that keeps objective perturbation at epsilon' >= epsilon / 2 (or in Delta's branch).

    Chaudhuri, Monteleoni and Sarwate (2011), Algorithm 2, on rows of norm <= 1 (as :class:`DPLogisticModel` runs
    it): epsilon' = epsilon - 2 log(1 + c C) with c = 1/4 (the logistic loss). Where epsilon' <= 0 the paper adds
    the regularisation Delta and runs at epsilon / 2; where 0 < epsilon' < epsilon / 2 it does not, and the noise's
    scale 2 / epsilon' grows without bound as epsilon' nears 0. There ``C`` is raised just past
    (e^(epsilon/2) - 1) / c, where epsilon' <= 0 and Delta applies; elsewhere ``C`` is returned as it is.
    """
    eps_p = epsilon - 2.0 * np.log1p(LOGISTIC_SMOOTHNESS * C)
    if 0.0 < eps_p < epsilon / 2.0:
        return float(np.expm1(epsilon / 2.0) / LOGISTIC_SMOOTHNESS * (1.0 + 1e-9))
    return float(C)


def unit_rows(X: np.ndarray, data_norm: float, fit_intercept: bool = True) -> tuple[np.ndarray, float]:
    """Rows as objective perturbation's proof needs them: the intercept's column of ones appended, all divided by q.

    q = sqrt(data_norm^2 + 1) with the intercept (data_norm without), so each row has norm <= 1 (Chaudhuri et al.
    2011, sec. 3: ||x|| <= 1). A model fitted on them gives ``w @ z = (w / q) @ [x, 1]``: coefficients divided by q.
    """
    q = float(np.sqrt(data_norm**2 + 1.0)) if fit_intercept else float(data_norm)
    Z = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    return Z / q, q


class DPLogisticModel(LinearClassifier):
    """Epsilon-DP logistic regression (diffprivlib, objective perturbation); linear and differentiable.

    ``epsilon`` is the model's privacy for neighbours that replace a row or add or remove one (any
    number of recourse queries costs nothing more); ``data_norm`` bounds every row's L2 norm and
    must hold for the data (ValueError naming data_norm otherwise). The fit runs on
    :func:`unit_rows` (norm <= 1, the intercept a regularised column), so ``C``, the inverse L2
    regularisation (diffprivlib's default 1.0), is that of the rows divided by sqrt(data_norm^2 +
    1); ``coef_`` and ``intercept_`` are on the rows as given.

    ``regularize_for_budget`` (default on): C from :func:`budget_C` (``C_`` after fit), so that the
    perturbation runs at epsilon' >= epsilon / 2. Chaudhuri et al. (2011), Algorithm 2, regularise
    more (their Delta) only where epsilon' would be <= 0; just above 0 the noise's scale
    ``2 / epsilon'`` is unbounded (at C = 1: epsilon in (0.45, 0.89); at epsilon 0.5, epsilon' = 0.054
    and HELOC's test accuracy fell to 0.52). There C is raised into the Delta branch; elsewhere C is
    used as given. ``False`` runs the paper's rule with C as given.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "epsilon": Float(0, 1e4, low_open=True),
        "data_norm": Float(0, 1e6, low_open=True),
        "C": Float(0, 1e12, low_open=True),
        "max_iter": Int(1, 10**7),
        "fit_intercept": Bool(),
        "regularize_for_budget": Bool(),
    }

    def __init__(
        self,
        *,
        epsilon: float,
        data_norm: float = 1.0,
        C: float = 1.0,
        max_iter: int = 1000,
        fit_intercept: bool = True,
        regularize_for_budget: bool = REGULARIZE_FOR_BUDGET,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.C = C
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.regularize_for_budget = regularize_for_budget
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> DPLogisticModel:
        """Fit with epsilon-DP on rows ``X`` (each of L2 norm <= data_norm) and 0/1 labels ``y``."""
        from diffprivlib.accountant import BudgetAccountant
        from diffprivlib.models import LogisticRegression

        eps = _check_epsilon(self.epsilon)
        norm = _check_epsilon(self.data_norm, "data_norm")
        X = check_matrix(X)
        y = check_binary_labels(y, n=X.shape[0])
        if np.unique(y).size < 2:
            raise InvalidInputError("y holds only one class; logistic regression needs both 0 and 1")
        row_norms = np.linalg.norm(X, axis=1)
        over = row_norms > norm * (1.0 + _NORM_TOL)
        if over.any():
            raise InvalidInputError(
                f"{int(over.sum())} rows have L2 norm above data_norm={norm:g} (largest {row_norms.max():.4g}); "
                "the DP guarantee of objective perturbation needs every row within data_norm: normalise rows "
                "(--normalize-rows, Preprocessor(normalize_rows=True)) or pass a larger data_norm chosen "
                "without looking at the data"
            )
        self.accountant_ = BudgetAccountant()
        self.C_ = budget_C(eps, self.C) if self.regularize_for_budget else self.C
        Z, q = unit_rows(X, norm, self.fit_intercept)
        est = LogisticRegression(
            epsilon=eps,
            data_norm=1.0,
            C=self.C_,
            max_iter=self.max_iter,
            fit_intercept=False,
            accountant=self.accountant_,
            random_state=derive_seed(self.random_state, 0),
        )
        with warnings.catch_warnings():
            # rows are checked above, so diffprivlib's clipping mends rounding at most; lbfgs may stop early on the
            # perturbed objective, which does not affect privacy
            warnings.filterwarnings("ignore", message=".*lbfgs failed to converge.*")
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*L-BFGS-B.*")
            est.fit(Z, y)
        w = est.coef_.ravel().astype(np.float64) / q
        self.coef_ = w[: X.shape[1]]
        self.intercept_ = float(w[-1]) if self.fit_intercept else 0.0
        self.epsilon_ = float(self.accountant_.total()[0])
        self.delta_ = 0.0
        self.n_features_in_ = X.shape[1]
        self.fitted_ = True
        return self


class DPMLPModel(TorchBackedClassifier):
    """The paper's ReLU network trained with DP-SGD (Opacus ``make_private_with_epsilon``).

    Architecture as :class:`~recourse_privacy.models.mlp.MLPModel` (``hidden_layers``,
    default one layer of 1,000 ReLU). Opacus picks the noise multiplier that reaches
    (``epsilon``, ``delta``) after ``epochs`` epochs at sampling rate batch_size / n under its
    ``accountant`` ("rdp", Renyi DP, our default: about 10x faster to evaluate than Opacus' default
    "prv", whose tighter bound needs a little less noise); per-example gradients are clipped to
    ``max_grad_norm``. Defaults (Adam lr 1e-3, 20 epochs, batch 256) are ours: DP-SGD needs
    larger batches and fewer epochs than the paper's non-private 250 epochs at batch 64. After
    ``fit``: ``epsilon_`` (achieved, from the accountant), ``delta_``, ``noise_multiplier_``.
    Noise and Poisson sampling use torch generators seeded from ``random_state`` (reproducible;
    a deployment would use Opacus' ``secure_mode``).
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "epsilon": Float(0, 1e4, low_open=True),
        "delta": Float(0, 1, low_open=True, high_open=True),
        "max_grad_norm": Float(0, 1e6, low_open=True),
        "hidden_layers": Ints(1, 100_000),
        "lr": Float(0, 10, low_open=True),
        "epochs": Int(1, 100_000),
        "batch_size": Int(1, 10**7),
    }

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float = 1e-5,
        max_grad_norm: float = 1.0,
        hidden_layers: Sequence[int] = (1000,),
        lr: float = 1e-3,
        epochs: int = 20,
        batch_size: int = 256,
        accountant: str = "rdp",
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.hidden_layers = tuple(hidden_layers)
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.accountant = accountant
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> DPMLPModel:
        """Train from scratch with DP-SGD on ``X`` with 0/1 labels ``y``."""
        import torch
        from opacus import PrivacyEngine
        from torch.utils.data import DataLoader, TensorDataset

        eps = _check_epsilon(self.epsilon)
        delta = float(self.delta)
        if not 0.0 < delta < 1.0:
            raise InvalidInputError(f"delta must be in (0, 1) for DP-SGD; got {self.delta!r}")
        clip = _check_epsilon(self.max_grad_norm, "max_grad_norm")
        epochs = check_positive_int(self.epochs, "epochs")
        batch = check_positive_int(self.batch_size, "batch_size")
        if self.accountant not in ("prv", "rdp"):
            raise InvalidInputError(f"accountant must be 'prv' or 'rdp'; got {self.accountant!r}")
        X = check_matrix(X)
        y = check_binary_labels(y, n=X.shape[0])
        if delta >= 1.0 / X.shape[0]:
            warnings.warn(
                f"delta={delta:g} is not below 1/n = {1 / X.shape[0]:.3g}: (epsilon, delta)-DP with such a "
                "delta allows releasing a few rows outright",
                stacklevel=2,
            )
        seed = derive_seed(self.random_state, 0)
        module = MLPModel._build(self, X.shape[1], seed)  # same initialisation as the non-private MLP
        module.train()
        ds = TensorDataset(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32))
        loader = DataLoader(
            ds, batch_size=min(batch, len(ds)), shuffle=True, generator=torch.Generator().manual_seed(seed)
        )
        opt = torch.optim.Adam(module.parameters(), lr=self.lr)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG turned off.*")
            warnings.filterwarnings("ignore", message=".*full backward hook.*")
            warnings.filterwarnings("ignore", message=".*Optimal order is the (largest|smallest) alpha.*")
            engine = PrivacyEngine(accountant=self.accountant)
            dp_module, dp_opt, dp_loader = engine.make_private_with_epsilon(
                module=module,
                optimizer=opt,
                data_loader=loader,
                target_epsilon=eps,
                target_delta=delta,
                epochs=epochs,
                max_grad_norm=clip,
                noise_generator=torch.Generator().manual_seed(seed + 1),
            )
            loss_fn = torch.nn.BCEWithLogitsLoss()
            dp_module.train()
            for _ in range(epochs):
                for xb, yb in dp_loader:
                    if len(xb) == 0:
                        continue
                    dp_opt.zero_grad(set_to_none=True)
                    loss_fn(dp_module(xb), yb).backward()
                    dp_opt.step()
            self.epsilon_ = float(engine.get_epsilon(delta))
        self.delta_ = delta
        self.noise_multiplier_ = float(dp_opt.noise_multiplier)
        # a clean copy of the trained weights, without Opacus' hooks
        self.module_ = MLPModel._build(self, X.shape[1], seed)
        self.module_.load_state_dict(module.state_dict())
        self.module_.eval()
        self.module_.requires_grad_(False)
        self.n_features_in_ = X.shape[1]
        self.fitted_ = True
        return self
