"""The audit's configuration: every knob of the game, typed, with the papers' defaults."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import PurePath
from typing import Any

from recourse_privacy.attacks.lrt import CDFS, CENTERS, VARIANCES
from recourse_privacy.attacks.query_extraction import DEFAULT_BUDGETS
from recourse_privacy.attacks.registry import ATTACKS, check_attack_names
from recourse_privacy.audit.threats import check_threats
from recourse_privacy.audit.user_inputs import (
    check_deployed_config,
    describe_data,
    describe_model,
    model_kind,
    object_digest,
)
from recourse_privacy.data import DATASETS
from recourse_privacy.defenses.registry import DEFENSES
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError, UnknownNameError
from recourse_privacy.hyperparams import Float, check_params
from recourse_privacy.metrics.intervals import minimum_targets_per_side
from recourse_privacy.models.device import check_device, device_kind
from recourse_privacy.models.registry import MODELS, make_model
from recourse_privacy.recourse.registry import RECOURSE_METHODS, check_action_set_support, check_compatible
from recourse_privacy.validation import check_choice, check_interval, check_positive_int, check_seed

DISTANCES = ("l1", "l2")
RECOURSE_FIT = ("members", "adversary")
DEFAULT_ATTACKS = ("cfd", "cfd-lrt", "loss", "loss-lrt", "random")
#: beyond this epsilon every DP guarantee is vacuous (Theorem 2's bound is 1 from about 40) and
#: e^epsilon overflows
MAX_EPSILON = 1e4
MAX_FEATURES = 1_000_000
MAX_CELLS = 500_000_000  # rows x features of generated data (float64: 4 GB)
#: the preprocessing's default correlation filter; a user's own model runs without one (every column must decode)
DEFAULT_CORR_THRESHOLD = 0.95
#: the synthetic data's options (beyond 1e6 the class centres overflow the scaling)
SYNTHETIC_PARAMS = {"class_sep": Float(0, 1e6), "flip_y": Float(0, 1)}


def _mask_frame(mask: Any) -> Any:
    """A members mask as a one-column DataFrame, so that it hashes like the data."""
    import numpy as np
    import pandas as pd

    return pd.DataFrame({"members": np.asarray(mask).astype(str)})


def _attack_list(attacks) -> tuple:
    """``attacks`` as a tuple of names: a list, or one comma-separated string (``"cfd,loss"``, as --attacks takes)."""
    if isinstance(attacks, str):
        return tuple(a.strip() for a in attacks.split(",") if a.strip())
    try:
        return tuple(attacks)
    except TypeError:
        raise InvalidInputError(
            f"attacks must list attack names (or be one comma-separated string); got {attacks!r}"
        ) from None


@dataclass(frozen=True)
class AuditConfig:
    """One recourse-based membership-inference game (Pawelczyk et al. 2023, Definition 1).

    ``n_members`` rows train the owner's model; ``n_nonmembers`` fresh rows (default
    ``n_members``) and the adversary's ``n_adversary`` rows (default ``2 * n_members``, or all
    the rows left when the dataset is smaller) are disjoint from them.
    The targets are the members and non-members that the owner's model rejects.

    ``data`` is a CSV/Parquet path or a pandas DataFrame (with ``target``, ``positive_label``
    and the column lists ``categorical``, ``immutable``, ``increasing`` and ``bounds``, column
    -> (lo, hi) in the data's units). ``model`` is a registered name or a model object: a
    scikit-learn classifier or Pipeline reading the original columns (fitted or not), a
    :class:`~recourse_privacy.models.TorchModel` or a
    :class:`~recourse_privacy.models.BaseClassifier` on the encoded features. The game trains
    the owner's model afresh on the members with the object's recipe (a clone; Pawelczyk et
    al. 2023's game), and every shadow model the same way.
    """

    dataset: str = "synthetic"
    data: Any = None  # a user's CSV/Parquet path or a pandas DataFrame instead of a named dataset
    target: str | None = None  # its label column
    positive_label: Any = None  # the favourable value of the label column (needed unless it is 0/1)
    categorical: tuple[str, ...] = ()  # columns of the user's data to one-hot encode (text columns always are)
    immutable: tuple[str, ...] = ()  # columns recourse must not change
    increasing: tuple[str, ...] = ()  # columns recourse may only increase
    bounds: dict = field(default_factory=dict)  # column -> (lo, hi): the range recourse may move a numeric column in
    data_dir: str | None = None
    n_features: int = 1000  # synthetic only
    model: Any = "logistic"  # a registered name or a model object
    recourse: str = "linear"
    attacks: tuple[str, ...] = DEFAULT_ATTACKS
    shadow_models: int = 10
    n_members: int = 2000
    n_nonmembers: int | None = None
    n_adversary: int | None = None
    distance: str = "l1"  # cost c(x, x') the attacks read (Pawelczyk et al. 2023: l1)
    variance: str = "per-example"  # CFD-LRT / Loss-LRT variance
    center: str = "mean"
    cdf: str = "normal"
    shadow_fraction: float = 0.5
    n_calibration: int = 1000
    actionable: bool = False  # apply the dataset's actionability constraints to recourse
    scaling: str = "standard"
    corr_threshold: float | None = 0.95
    normalize_rows: bool = False
    data_params: dict = field(default_factory=dict)  # e.g. synthetic {"class_sep": 0.5, "flip_y": 0.05}
    model_params: dict = field(default_factory=dict)  # e.g. {"epochs": 50} or {"C": 0.1}
    recourse_params: dict = field(default_factory=dict)  # e.g. {"lam": 0.1}
    recourse_fit: str = (
        "members"  # data a fitted recourse method (FACE, VAEs, DiCE, GS) learns from: members | adversary
    )
    defense: str = "none"  # a registered defense: none | dpm | laplace (Huang et al. 2023)
    epsilon: float | None = None  # DPM: the model's epsilon; laplace: epsilon per recourse query
    seed: int = 0
    n_jobs: int = 1
    # where torch trains the MLPs and searches gradient recourse: cpu | cuda | auto (CUDA where available)
    device: str = "auto"
    # RMIA on counterfactual distances (Zarifzadeh et al. 2024): the offline a (None: tuned on the shadow game),
    # the pairwise threshold gamma, and how many population points of the pool it queries the owner's recourse for
    rmia_a: float | None = None
    rmia_gamma: float = 1.0
    rmia_population: int = 500
    # the threats beyond membership (audit.threats): extraction at each query budget, attribute inference of a
    # sensitive column; membership (the game) is always played
    threats: tuple[str, ...] = ("membership",)
    query_budgets: tuple[int, ...] = DEFAULT_BUDGETS
    sensitive: str | None = None
    extraction_repeats: int = 5
    # the release threat (audit.release): applicants answered and published, and whether the factuals go with them
    release_size: int = 1000
    release_with_factuals: bool = False
    # the as-deployed audit (audit/deployed.py): per row of ``data``, whether it trained the fitted ``model``
    # (a column name, or a boolean / 1-0 mask), or ``data`` the training rows and ``holdout`` the held-out ones
    members: Any = None
    holdout: Any = None
    groups: tuple[str, ...] = ()  # columns whose values' exposure is measured apart (audit/exposure.py)

    def __post_init__(self):
        object.__setattr__(self, "attacks", _attack_list(self.attacks))
        object.__setattr__(self, "threats", (self.threats,) if isinstance(self.threats, str) else tuple(self.threats))
        object.__setattr__(self, "query_budgets", tuple(self.query_budgets))
        object.__setattr__(self, "groups", (self.groups,) if isinstance(self.groups, str) else tuple(self.groups))
        if isinstance(self.holdout, PurePath):
            object.__setattr__(self, "holdout", str(self.holdout))
        if isinstance(self.data, PurePath):
            object.__setattr__(self, "data", str(self.data))
        for name in ("categorical", "immutable", "increasing"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        object.__setattr__(self, "bounds", {str(k): tuple(v) for k, v in dict(self.bounds).items()})
        for name in ("data_params", "model_params", "recourse_params"):
            object.__setattr__(self, name, dict(getattr(self, name)))

    def validate(self) -> AuditConfig:
        """Check every name and number before any long computation; raise an InvalidInputError naming the problem."""
        if self.data is None and self.dataset not in DATASETS:
            raise UnknownNameError(
                f"unknown dataset {self.dataset!r}; choose one of {', '.join(DATASETS)} "
                "or pass --data FILE --target COLUMN"
            )
        if self.data is not None and not self.target:
            raise InvalidInputError("--data needs --target COLUMN (the binary label column)")
        self.check_user_inputs()
        if self.deployed:
            check_deployed_config(self)
        RECOURSE_METHODS.check(self.recourse)
        check_choice(self.recourse_fit, "recourse_fit", RECOURSE_FIT)
        if not self.user_model:
            MODELS.check(self.model)
            DEFENSES.get(self.defense).obj.validate(self)
            model_name = self.effective_model[0]
            check_compatible(
                self.effective_recourse, MODELS.get(model_name).meta["capabilities"], f"model {self.model!r}"
            )
        asked = [f"--{n}" for n in ("bounds", "immutable", "increasing", "actionable") if getattr(self, n)]
        check_action_set_support(self.effective_recourse, asked)
        check_attack_names(self.attacks)
        if self.rmia_a is not None:
            check_interval(self.rmia_a, "rmia_a", 0, 1, closed="both")
        check_interval(self.rmia_gamma, "rmia_gamma", 0, 1e12, closed="right")
        check_positive_int(self.rmia_population, "rmia_population")
        self._check_threats()
        if (self.needs_shadow_models or self.needs_online_shadow) and self.shadow_models < 2:
            raise InvalidInputError(
                f"the likelihood-ratio attacks need at least 2 shadow models (--shadow-models); "
                f"got {self.shadow_models}"
            )
        check_positive_int(self.n_members, "n_members")
        for name in ("n_nonmembers", "n_adversary"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        self._check_minimum_targets()
        check_positive_int(self.n_features, "n_features")
        check_positive_int(self.n_calibration, "n_calibration")
        check_positive_int(self.n_jobs, "n_jobs")
        if check_device(self.device, "device") == "cuda":
            device_kind(self.device)  # no CUDA here: an IncompatibleError now, not when the first model trains
        check_choice(self.distance, "distance", DISTANCES)
        check_choice(self.variance, "variance", VARIANCES)
        check_choice(self.center, "center", CENTERS)
        check_choice(self.cdf, "cdf", CDFS)
        check_interval(self.shadow_fraction, "shadow_fraction", 0, 1)
        if self.needs_shadow_models and self.n_adversary is not None and self.shadow_fraction * self.n_adversary < 2:
            raise InvalidInputError(
                f"--n-adversary {self.n_adversary} gives each shadow model {self.shadow_fraction * self.n_adversary:g} "
                f"rows (--shadow-fraction {self.shadow_fraction:g} of the pool); it needs at least 2 of both classes: "
                f"use --n-adversary {math.ceil(2 / self.shadow_fraction)} or more (hundreds for a useful reference)"
            )
        check_seed(self.seed)
        if self.n_features > MAX_FEATURES:
            raise InvalidInputError(f"n_features must be an integer in [1, {MAX_FEATURES:_}]; got {self.n_features!r}")
        if self.data is None and self.dataset == "synthetic" and sum(self.pool_sizes) * self.n_features > MAX_CELLS:
            raise InvalidInputError(
                f"the synthetic data would have {sum(self.pool_sizes):_} rows x {self.n_features:_} "
                f"features, more than {MAX_CELLS:_} values (4 GB): use fewer rows or features"
            )
        if self.epsilon is not None:
            check_interval(self.epsilon, "epsilon", 0, MAX_EPSILON, closed="right")
        for name in ("data_params", "model_params", "recourse_params"):
            bad = [k for k in getattr(self, name) if not isinstance(k, str)]
            if bad:
                raise InvalidInputError(f"{name} keys must be parameter names; got {bad[0]!r}")
        if self.data is None and self.dataset == "synthetic":
            check_params("synthetic data", self.data_params, SYNTHETIC_PARAMS)
        self._check_component_params()
        return self

    def _check_threats(self) -> None:
        """--threats names, --query-budgets within the adversary's pool, --sensitive with the attribute threat."""
        object.__setattr__(self, "threats", check_threats(self.threats))
        if "attribute" in self.threats and not self.sensitive:
            raise InvalidInputError("--threats attribute needs --sensitive COLUMN (the attribute to infer)")
        if self.sensitive and not {"attribute", "release"} & set(self.threats):
            raise InvalidInputError(
                "--sensitive applies to the attribute and release threats: add --threats attribute or release (or all)"
            )
        check_positive_int(self.release_size, "release_size (--release-size)")
        if self.release_with_factuals and "release" not in self.threats:
            raise InvalidInputError("--release-with-factuals applies to the release threat: add --threats release")
        if not self.query_budgets:
            raise InvalidInputError("--query-budgets is empty: give at least one number of queries")
        for b in self.query_budgets:
            check_positive_int(b, "query budget (--query-budgets)")
        object.__setattr__(self, "query_budgets", tuple(sorted(set(self.query_budgets))))
        check_positive_int(self.extraction_repeats, "extraction_repeats")
        n_adv = self.pool_sizes[2]
        if ("extraction" in self.threats or "attribute" in self.threats) and self.query_budgets[-1] > n_adv:
            raise InvalidInputError(
                f"--query-budgets reaches {self.query_budgets[-1]} queries but the adversary's pool has {n_adv} rows "
                "to query with: lower the budgets or raise --n-adversary"
            )

    def _check_minimum_targets(self) -> None:
        """Members and non-members each at least :func:`minimum_targets_per_side` (the targets are some of them)."""
        minimum = minimum_targets_per_side()
        for flag, n in (("--n-members", self.n_members), ("--n-nonmembers", self.pool_sizes[1])):
            if n < minimum:
                raise InvalidInputError(
                    f"{flag} is {n}: a verdict needs at least {minimum} targets (rejected points) on each side, "
                    f"members and non-members, the fewest for which the AUC's 95% interval can detect any leak "
                    f"(README, 'What the numbers mean'); raise {flag} to {minimum} or more"
                )

    def check_user_inputs(self) -> None:
        """The user's data options and model object (:meth:`validate` runs it; so does the ``recourse`` command)."""
        self._check_user_data()
        if self.user_model:
            self._check_user_model()

    def _check_user_data(self) -> None:
        """The user's data options: a path or a DataFrame; column options only with it; numeric bounds."""
        is_path = isinstance(self.data, str)
        if self.data is not None and not is_path and not describe_data(self.data).startswith("DataFrame("):
            raise InvalidInputError(
                f"data must be a CSV/Parquet path or a pandas DataFrame; got {type(self.data).__name__}"
            )
        if self.data is not None and self.data_params:
            hint = (
                f"positive_label={self.data_params['positive_label']!r} (--positive-label)"
                if "positive_label" in self.data_params
                else "positive_label, categorical, immutable, increasing, bounds"
            )
            raise InvalidInputError(
                f"data_params {sorted(self.data_params)} apply to the named datasets; your own data takes {hint}"
            )
        given = [n for n in ("positive_label", "categorical", "immutable", "increasing", "bounds") if getattr(self, n)]
        if given and self.data is None:
            raise InvalidInputError(
                f"{', '.join(given)} apply to your own data: pass data=... (--data FILE) and target=... as well"
            )
        for column, pair in self.bounds.items():
            ok = len(pair) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
            if not ok or not pair[0] <= pair[1]:
                raise InvalidInputError(f"bounds[{column!r}] must be two numbers (lo, hi) with lo <= hi; got {pair!r}")

    def _check_user_model(self) -> None:
        """A model object: what kind it is, and the settings that cannot apply to it."""
        kind = model_kind(self.model)
        if self.data is None:
            raise InvalidInputError(
                f"model {describe_model(self.model)} is your own model: pass your data too (data=... / --data FILE "
                "--target COLUMN), the named datasets are for the registered models"
            )
        if self.defense != "none":
            raise InvalidInputError(
                f"defense {self.defense!r} trains or wraps a registered model; with your own model "
                f"{describe_model(self.model)} use defense='none'"
            )
        if self.model_params:
            raise InvalidInputError(
                f"model_params {sorted(self.model_params)} apply to registered models; set the parameters "
                f"on your {describe_model(self.model)} itself"
            )
        if kind == "estimator":
            if self.corr_threshold not in (None, DEFAULT_CORR_THRESHOLD):
                raise InvalidInputError(
                    f"corr_threshold={self.corr_threshold} drops encoded columns, but your model "
                    f"{describe_model(self.model)} reads every original column, so the audit must decode every "
                    "point: leave corr_threshold at its default (no filter is applied to your own model)"
                )
            if self.normalize_rows:
                raise InvalidInputError(
                    f"normalize_rows cannot be decoded back to the columns your model {describe_model(self.model)} "
                    "reads: leave it off"
                )

    @property
    def user_model(self) -> bool:
        """Whether ``model`` is the user's own object rather than a registered name."""
        return not isinstance(self.model, str)

    @property
    def deployed(self) -> bool:
        """Whether the audit reads the fitted model as it is, against its real training rows (audit/deployed.py)."""
        return self.members is not None or self.holdout is not None

    @property
    def model_label(self) -> str:
        """The model as the tables print it: the registered name or e.g. ``Pipeline(StandardScaler, LogisticRegression)``."""
        return describe_model(self.model)

    def _check_component_params(self) -> None:
        """Construct the model and the recourse method once, so that their typed, bounded parameters
        (:mod:`recourse_privacy.hyperparams`) are checked now, not when the first cell trains."""
        model_name, model_params = self.effective_model
        if self.user_model:
            model_name = None  # the user's object is checked by model_kind; only the method is constructed here
        recourse_cls = RECOURSE_METHODS.get(self.effective_recourse).obj
        recourse_params = dict(self.recourse_params)
        if "epsilon" in inspect.signature(recourse_cls).parameters and "epsilon" not in recourse_params:
            recourse_params["epsilon"] = self.epsilon if self.epsilon is not None else 1.0
        checks = [(f"recourse {self.effective_recourse!r}", lambda: recourse_cls(**recourse_params))]
        if model_name is not None:
            checks.insert(0, (f"model {model_name!r}", lambda: make_model(model_name, random_state=0, **model_params)))
        for what, make in checks:
            try:
                make()
            except RecoursePrivacyError:
                raise
            except (TypeError, ValueError) as err:
                raise InvalidInputError(f"{what}: {err}") from None

    @property
    def attack_names(self) -> tuple[str, ...]:
        """The attacks the audit runs: the configured ones, then the defense's adaptive attacks (Kerckhoffs)."""
        extra = DEFENSES.get(self.defense).obj.adaptive_attacks
        return tuple(self.attacks) + tuple(a for a in extra if a not in self.attacks)

    @property
    def needs_shadow_models(self) -> bool:
        """Whether any attack the audit runs needs the adversary's shadow models."""
        return any("shadow_models" in ATTACKS.get(a).needs for a in self.attack_names)

    @property
    def needs_shadow_recourse(self) -> bool:
        """Whether any attack the audit runs needs recourse under every (offline) shadow model (the expensive part)."""
        return any({"shadow_models", "shadow_recourse"} <= ATTACKS.get(a).needs for a in self.attack_names)

    @property
    def needs_online_shadow(self) -> bool:
        """Whether any attack the audit runs needs online reference models (trained on halves of pool and targets)."""
        return any("online_shadow" in ATTACKS.get(a).needs for a in self.attack_names)

    @property
    def needs_online_recourse(self) -> bool:
        """Whether an online attack needs recourse under every online reference model."""
        return any({"online_shadow", "shadow_recourse"} <= ATTACKS.get(a).needs for a in self.attack_names)

    @property
    def effective_model(self) -> tuple[str, dict]:
        """(model name, params) the owner and the shadow models train, as the defense decides (DPM: the DP model)."""
        return DEFENSES.get(self.defense).obj.model(self)

    @property
    def effective_recourse(self) -> str:
        """The recourse method the owner runs, as the defense decides (Laplace Recourse: 'laplace')."""
        return DEFENSES.get(self.defense).obj.recourse(self)

    @property
    def pool_sizes(self) -> tuple[int, int, int]:
        """(members, non-members, adversary) pool sizes as requested.

        The adversary's pool defaults to twice the members, so that with ``shadow_fraction`` 0.5
        every shadow model trains on as many rows as the owner's model (Pawelczyk et al. 2023;
        Carlini et al. 2022's LiRA). A named dataset too small for that gives the adversary every
        row that is left (:func:`~recourse_privacy.audit.stages.resolve_pool_sizes`).
        """
        return (self.n_members, self.n_nonmembers or self.n_members, self.n_adversary or 2 * self.n_members)

    def to_dict(self) -> dict:
        """JSON-ready configuration: a model object and a DataFrame are replaced by their descriptions
        (and ``model_sha256`` / ``data_sha256``, see :func:`~recourse_privacy.audit.user_inputs.object_digest`)."""
        objects = {"model": self.model, "data": self.data, "holdout": self.holdout}
        if self.members is not None and not isinstance(self.members, str):
            objects["members"] = self.members
        d = asdict(replace(self, model="logistic", data=None, members=None, holdout=None))
        d["model"] = describe_model(self.model)
        d["data"] = describe_data(self.data)
        d["holdout"] = describe_data(self.holdout)
        d["members"] = self.members if isinstance(self.members, str) or self.members is None else "mask"
        d["groups"] = list(self.groups)
        d["attacks"] = list(self.attacks)
        d["threats"] = list(self.threats)
        d["query_budgets"] = list(self.query_budgets)
        for name in ("categorical", "immutable", "increasing"):
            d[name] = list(d[name])
        d["bounds"] = {k: list(v) for k, v in self.bounds.items()}
        for name, obj in objects.items():
            if obj is not None and not isinstance(obj, str):
                d[f"{name}_sha256"] = object_digest(obj if name != "members" else _mask_frame(obj))
        if not isinstance(self.positive_label, str | int | float | bool | type(None)):
            d["positive_label"] = str(self.positive_label)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> AuditConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise a ValueError naming them."""
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if not k.endswith("_sha256")}  # written by to_dict
        unknown = sorted(set(d) - known)
        if unknown:
            raise InvalidInputError(f"unknown audit setting(s): {', '.join(unknown)}")
        return cls(**d)

    def digest(self) -> str:
        """A short hash of everything that changes the numbers (for caches).

        Fields left at their defaults are not hashed, so that adding a new setting with a
        default keeps the keys of every existing cell and shadow cache. ``device`` counts by what
        it resolves to here, and only when that is CUDA (whose float rounding differs from the
        CPU's): ``cpu`` and ``auto`` on a machine without CUDA share the keys of before.
        """
        defaults = AuditConfig().to_dict()
        d = {k: v for k, v in self.to_dict().items() if k not in ("n_jobs", "device") and v != defaults.get(k)}
        if self.device != "cpu" and device_kind(self.device) != "cpu":
            d["device"] = device_kind(self.device)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
