"""The audit's configuration: every knob of the game, typed, with the paper's defaults."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields

from recourse_privacy.validation import check_positive_int

DISTANCES = ("l1", "l2")
DEFAULT_ATTACKS = ("cfd", "cfd-lrt", "loss", "loss-lrt", "random")
#: none; dpm: the model trained with DP (paper 001); laplace: Laplace Recourse (paper 001, linear models)
DEFENSES = ("none", "dpm", "laplace")


@dataclass
class AuditConfig:
    """One recourse-based membership-inference game (paper 000, Definition 1).

    ``n_members`` rows train the owner's model; ``n_nonmembers`` fresh rows and the
    adversary's ``n_adversary`` rows (both default to ``n_members``) are disjoint from them.
    The targets are the members and non-members that the owner's model rejects.
    """

    dataset: str = "synthetic"
    data: str | None = None              # a user's CSV/Parquet instead of a named dataset
    target: str | None = None            # its label column
    data_dir: str | None = None
    n_features: int = 1000               # synthetic only
    model: str = "logistic"
    recourse: str = "linear"
    attacks: tuple[str, ...] = DEFAULT_ATTACKS
    shadow_models: int = 10
    n_members: int = 2000
    n_nonmembers: int | None = None
    n_adversary: int | None = None
    distance: str = "l1"                 # cost c(x, x') the attacks read (paper 000: l1)
    variance: str = "per-example"        # CFD-LRT / Loss-LRT variance
    center: str = "mean"
    cdf: str = "normal"
    shadow_fraction: float = 0.5
    n_calibration: int = 1000
    actionable: bool = False             # apply the dataset's actionability constraints to recourse
    scaling: str = "standard"
    corr_threshold: float | None = 0.95
    normalize_rows: bool = False
    data_params: dict = field(default_factory=dict)      # e.g. synthetic {"class_sep": 0.5, "flip_y": 0.05}
    model_params: dict = field(default_factory=dict)     # e.g. {"epochs": 50} or {"C": 0.1}
    recourse_params: dict = field(default_factory=dict)  # e.g. {"lam": 0.1}
    defense: str = "none"                # none | dpm | laplace (paper 001)
    epsilon: float | None = None         # DPM: the model's epsilon; laplace: epsilon per recourse query
    seed: int = 0
    n_jobs: int = 1

    def __post_init__(self):
        self.attacks = tuple(self.attacks)

    def validate(self) -> "AuditConfig":
        """Check every name and number before any long computation; raise a ValueError naming the problem."""
        from recourse_privacy.attacks import LRT_ATTACKS, check_attack_names
        from recourse_privacy.attacks.lrt import CDFS, CENTERS, VARIANCES
        from recourse_privacy.data import DATASETS
        from recourse_privacy.models import MODELS, check_model_name
        from recourse_privacy.recourse import check_recourse_name, recourse_requires

        if self.data is None and self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose one of {', '.join(DATASETS)} "
                             "or pass --data FILE --target COLUMN")
        if self.data is not None and not self.target:
            raise ValueError("--data needs --target COLUMN (the binary label column)")
        check_model_name(self.model)
        check_recourse_name(self.recourse)
        self._validate_defense()
        need = recourse_requires(self.effective_recourse)
        _, linear, differentiable = MODELS[self.effective_model[0]]
        if need == "linear" and not linear:
            raise ValueError(f"recourse {self.recourse!r} is exact recourse for linear models; model "
                             f"{self.model!r} is not linear: use --recourse scfe")
        if need == "differentiable" and not differentiable:
            raise ValueError(f"recourse {self.recourse!r} needs gradients; model {self.model!r} gives none")
        check_attack_names(self.attacks)
        if any(a in LRT_ATTACKS for a in self.attacks) and self.shadow_models < 2:
            raise ValueError(f"the likelihood-ratio attacks need at least 2 shadow models (--shadow-models); "
                             f"got {self.shadow_models}")
        check_positive_int(self.n_members, "n_members")
        for name in ("n_nonmembers", "n_adversary"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        check_positive_int(self.n_features, "n_features")
        check_positive_int(self.n_calibration, "n_calibration")
        check_positive_int(self.n_jobs, "n_jobs")
        if self.distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}; got {self.distance!r}")
        for value, options, name in ((self.variance, VARIANCES, "variance"), (self.center, CENTERS, "center"),
                                     (self.cdf, CDFS, "cdf")):
            if value not in options:
                raise ValueError(f"{name} must be one of {options}; got {value!r}")
        if not 0 < self.shadow_fraction < 1:
            raise ValueError(f"shadow_fraction must be in (0, 1); got {self.shadow_fraction}")
        return self

    def _validate_defense(self) -> None:
        from recourse_privacy.models.registry import DP_MODELS, MODELS

        if self.defense not in DEFENSES:
            raise ValueError(f"defense must be one of {', '.join(DEFENSES)}; got {self.defense!r}")
        if self.defense == "none":
            if self.epsilon is not None:
                raise ValueError("epsilon is given but defense is 'none'; choose --defense dpm or laplace")
            if self.model in DP_MODELS:
                raise ValueError(f"model {self.model!r} is the DPM defense: use --defense dpm --epsilon E")
            if self.recourse == "laplace":
                raise ValueError("recourse 'laplace' is the LR defense: use --defense laplace --epsilon E")
            return
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0 or eps == float("inf"):
            raise ValueError(f"defense {self.defense!r} needs epsilon, a finite number > 0 (--epsilon); got {eps!r}")
        if "epsilon" in self.model_params or "epsilon" in self.recourse_params:
            raise ValueError("give epsilon once, with --epsilon, not in --model-param / --recourse-param")
        if self.defense == "laplace":
            if not MODELS[self.model][1] or self.model in DP_MODELS:
                raise ValueError(f"Laplace Recourse moves along the weight vector of a linear model; model "
                                 f"{self.model!r} is not one: use --model logistic")
            if self.recourse not in ("linear", "laplace"):
                raise ValueError(f"Laplace Recourse replaces exact linear recourse; got recourse {self.recourse!r}: "
                                 "use --recourse linear")
            if self.actionable:
                raise ValueError("Laplace Recourse moves along the full weight vector; --actionable is not supported")
        else:  # dpm
            if self.recourse == "laplace":
                raise ValueError("recourse 'laplace' belongs to --defense laplace, not dpm")
            if (self.effective_model[0] == "dp-logistic" and not self.normalize_rows
                    and "data_norm" not in self.model_params):
                raise ValueError("DPM logistic regression (diffprivlib) is DP only for rows of L2 norm <= data_norm "
                                 "= 1: add --normalize-rows (unit rows, paper 001's preprocessing), or give a bound "
                                 "chosen without looking at the data (--model-param data_norm=...)")

    @property
    def effective_model(self) -> tuple[str, dict]:
        """(model name, params) the owner and the shadow models train: the DP counterpart under dpm."""
        if self.defense != "dpm":
            return self.model, dict(self.model_params)
        from recourse_privacy.models.registry import dp_counterpart

        name, extra = dp_counterpart(self.model)
        return name, {**extra, **self.model_params, "epsilon": self.epsilon}

    @property
    def effective_recourse(self) -> str:
        """The recourse method the owner runs: 'laplace' under the laplace defense."""
        return "laplace" if self.defense == "laplace" else self.recourse

    @property
    def pool_sizes(self) -> tuple[int, int, int]:
        """(members, non-members, adversary) pool sizes."""
        return (self.n_members, self.n_nonmembers or self.n_members, self.n_adversary or self.n_members)

    def to_dict(self) -> dict:
        """JSON-ready configuration."""
        d = asdict(self)
        d["attacks"] = list(self.attacks)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "AuditConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise a ValueError naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown audit setting(s): {', '.join(unknown)}")
        return cls(**d)

    def digest(self) -> str:
        """A short hash of everything that changes the numbers (for caches).

        Fields left at their defaults are not hashed, so that adding a new setting with a
        default keeps the keys of every existing cell and shadow cache.
        """
        defaults = AuditConfig().to_dict()
        d = {k: v for k, v in self.to_dict().items() if k != "n_jobs" and v != defaults[k]}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
