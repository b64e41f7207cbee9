"""DPM (Huang et al. 2023): the owner, and every shadow model, train the DP counterpart of the configured model.

The mechanism itself (diffprivlib's logistic regression, Opacus' DP-SGD) lives with the models
(:mod:`recourse_privacy.models.dp`); this module holds the defense the audit plays with it, and
the checks every epsilon-taking defense shares (:class:`DPDefense`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recourse_privacy.defenses.registry import Defense, register_defense, selected_share
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models.registry import MODELS, dp_counterpart
from recourse_privacy.recourse.registry import RECOURSE_METHODS
from recourse_privacy.report.dp_verdict import dp_bounds
from recourse_privacy.results.summaries import DPSummary
from recourse_privacy.validation import check_delta, check_epsilon

if TYPE_CHECKING:
    from recourse_privacy.audit.config import AuditConfig

__all__ = ["DPDefense", "DPMDefense"]


class DPDefense(Defense):
    """A defense that takes ``--epsilon``: given once, a finite number > 0."""

    def validate(self, config: AuditConfig) -> None:
        if config.epsilon is None or isinstance(config.epsilon, bool):
            raise InvalidInputError(
                f"defense {config.defense!r} needs epsilon, a finite number > 0 (--epsilon); got {config.epsilon!r}"
            )
        check_epsilon(config.epsilon, "epsilon")
        if "epsilon" in config.model_params or "epsilon" in config.recourse_params:
            raise InvalidInputError("give epsilon once, with --epsilon, not in --model-param / --recourse-param")


@register_defense(
    "dpm",
    description="the model trained with DP (Huang et al. 2023, DPM): diffprivlib logistic "
    "regression or Opacus DP-SGD; recourse is post-processing of the model",
)
class DPMDefense(DPDefense):
    """DPM: the owner (and every shadow model) trains the DP counterpart of the configured model."""

    name = "dpm"
    covered_signals = ("distance", "score")  # the model is DP: its scores and every recourse are post-processing

    def validate(self, config: AuditConfig) -> None:
        super().validate(config)
        if config.recourse == "laplace":
            raise IncompatibleError("recourse 'laplace' belongs to --defense laplace, not dpm")
        entry = RECOURSE_METHODS.get(self.recourse(config))
        if callable(getattr(entry.obj, "fit", None)) and config.recourse_fit != "adversary":
            raise IncompatibleError(
                f"recourse {config.recourse!r} is fitted on data (a graph, a VAE, ranges or a seed); fitted on the "
                "members it is not a function of the DP model, and its counterfactuals can copy member rows (FACE "
                "returns member rows verbatim), so DPM's guarantee does not cover it. Fit it on data the adversary "
                "may see with --recourse-fit adversary, or choose a recourse that reads only the model (linear, "
                "scfe, cadex, laplace via --defense dpm-laplace)"
            )
        self.check_data_norm(config)
        self._check_delta(config)

    def check_data_norm(self, config: AuditConfig) -> None:
        """diffprivlib's logistic regression is DP only for rows of bounded L2 norm: refuse a run that bounds none."""
        if (
            self.model(config)[0] == "dp-logistic"
            and not config.normalize_rows
            and "data_norm" not in config.model_params
        ):
            raise InvalidInputError(
                "DPM logistic regression (diffprivlib) is DP only for rows of L2 norm <= data_norm "
                "= 1: add --normalize-rows (unit rows, Huang et al. 2023's preprocessing), or give "
                "a bound chosen without looking at the data (--model-param data_norm=...)"
            )

    def _check_delta(self, config: AuditConfig) -> None:
        """DP-SGD's delta, before any training: the bound on the targets needs it below their smallest share."""
        import inspect

        name, params = self.model(config)
        try:
            default = inspect.signature(MODELS.get(name).obj).parameters.get("delta")
        except (TypeError, ValueError):  # a plugin's model without a signature: it checks its own delta
            return
        if default is None:
            return
        delta = params.get("delta", default.default)
        n_mem, n_non, _ = config.pool_sizes
        check_delta(delta, "--model-param delta")
        if not 0 < delta < 1 / (n_mem + n_non):
            raise InvalidInputError(
                f"--model-param delta must be in (0, {1 / (n_mem + n_non):.3g}), below 1 / (members + non-members) = "
                f"1/{n_mem + n_non} (DP-SGD's delta; the bound on the targets needs it below their smallest share); "
                f"got {delta!r}" + ("" if "delta" in config.model_params else " (the default)")
            )

    def model(self, config: AuditConfig) -> tuple[str, dict]:
        name, extra = dp_counterpart(config.model)
        return name, {**extra, **config.model_params, "epsilon": config.epsilon}

    def summary(self, config, model, session, recourse, is_member, X_pool, y_pool) -> DPSummary:
        eps = float(model.epsilon_)
        delta = float(getattr(model, "delta_", 0.0))
        fitted = callable(getattr(RECOURSE_METHODS.get(self.recourse(config)).obj, "fit", None))
        return DPSummary(
            guarantee="the model is (epsilon, delta)-DP in the members; the recourse reads only the model, the query"
            + (" and the adversary's own pool (--recourse-fit adversary)" if fitted else "")
            + ", so the release is "
            "post-processing of it (Huang et al. 2023, Theorem 3.4). Not covered: the preprocessing fitted on the "
            "members (docs/dp-defenses.md)",
            defense=config.defense,
            mechanism=f"DP-trained model {self.model(config)[0]!r} (Huang et al. 2023, DPM)",
            epsilon_target=float(config.epsilon),
            epsilon_per_query=eps,
            epsilon_total=eps,
            delta=delta,
            bound_epsilon=eps,
            **dp_bounds(eps, delta, selected_share(config, is_member)),
            composition="the model is trained once with (epsilon, delta)-DP; every recourse is post-processing "
            "of it, so any number of queries costs nothing more: epsilon_total = epsilon_per_query = the model's "
            "epsilon" + (" (Opacus' accountant, achieved)" if delta > 0 else ""),
        )
