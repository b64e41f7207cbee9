"""The model configurations of the papers, registered by name (Pawelczyk et al. 2023, Table 5 and
Figure 3; Huang et al. 2023 for the DP-trained ones)."""

from __future__ import annotations

from recourse_privacy.models.boosting import LightGBMModel, XGBoostModel
from recourse_privacy.models.dp import DPLogisticModel, DPMLPModel
from recourse_privacy.models.logistic import LogisticModel
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.models.registry import register_model

#: hidden layers of the named MLPs
HIDDEN = {"mlp": (1000,), "mlp3-100": (100,) * 3, "mlp3-333": (333,) * 3, "mlp3-1000": (1000,) * 3}
_MLP_DESCRIPTIONS = {
    "mlp": "1 hidden layer of 1,000 ReLU (Pawelczyk et al. 2023, Table 5)",
    "mlp3-100": "3 hidden layers of 100 ReLU (Pawelczyk et al. 2023, Figure 3b)",
    "mlp3-333": "3 hidden layers of 333 ReLU (Pawelczyk et al. 2023, Figure 3c)",
    "mlp3-1000": "3 hidden layers of 1,000 ReLU (Pawelczyk et al. 2023, Figure 3d)",
}

register_model(
    "logistic",
    description="logistic regression (scikit-learn, C=1)",
    capabilities=("linear", "gradients"),
    dp_counterpart=("dp-logistic", {}),
)(LogisticModel)


def _mlp_factory(hidden: tuple[int, ...]):
    def make(random_state=None, **params) -> MLPModel:
        params.setdefault("hidden_layers", hidden)
        return MLPModel(random_state=random_state, **params)

    return make


for _name, _hidden in HIDDEN.items():
    _factory = _mlp_factory(_hidden)
    _factory.__qualname__ = f"mlp_factory[{_name}]"
    register_model(
        _name,
        description=_MLP_DESCRIPTIONS[_name],
        capabilities=("gradients",),
        dp_counterpart=("dp-mlp", {"hidden_layers": _hidden}),
    )(_factory)

register_model(
    "dp-logistic",
    description="epsilon-DP logistic regression (objective perturbation on unit rows, by diffprivlib; rows of norm <= data_norm)",
    capabilities=("linear", "gradients"),
    dp=True,
)(DPLogisticModel)
register_model(
    "dp-mlp",
    description="ReLU network trained with DP-SGD (Opacus; epsilon, delta, max_grad_norm)",
    capabilities=("gradients",),
    dp=True,
)(DPMLPModel)
register_model(
    "xgboost",
    description="gradient-boosted trees (XGBoost's XGBClassifier: 200 trees of depth 4, learning rate 0.1, hist)",
)(XGBoostModel)
register_model(
    "lightgbm",
    description="gradient-boosted trees (LightGBM's LGBMClassifier: 200 trees of depth 4, learning rate 0.1)",
)(LightGBMModel)
