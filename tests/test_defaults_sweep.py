"""Every recourse method with its default parameters on every registered dataset (issue 23, item 5).

No internal error anywhere; a method is refused only where it truly cannot apply (the linear-model
methods on an MLP: ``skipped`` with the reason), and ``violations`` (the action set: immutable,
increase-only, public bounds, one-hot groups, integers) is 0 wherever a counterfactual is valid.
The fast part (the private methods and exact linear recourse on a logistic model) runs by
default; every method, and an MLP, is ``slow``.
"""

from __future__ import annotations

import math

import pytest

from recourse_privacy.errors import RecoursePrivacyError
from recourse_privacy.evaluation.quality import run_quality
from recourse_privacy.recourse import RECOURSE_METHODS

DATASETS = ("adult", "heloc", "compas", "diabetes", "synthetic")
#: the private methods (and the exact linear baseline), fast at these sizes
FAST = ("linear", "laplace", "dpc", "privrecourse", "privrecourse-data")
#: rows that train the model; >= PrivRecourse's default K = 500 clusters (a graph needs K <= rows)
N_TRAIN = 600


def _sweep(dataset: str, model: str, methods) -> dict:
    try:
        out = run_quality(dataset, model, list(methods), n_points=5, n_train=N_TRAIN, seed=0)
    except RecoursePrivacyError as err:  # a clear error is a failure here too: defaults must run
        pytest.fail(f"{dataset}/{model}: {err}")
    return out.table


def _check(table: dict, dataset: str, model: str) -> None:
    for name, metrics in table.items():
        if "skipped" in metrics:
            assert model != "logistic" and "linear model" in metrics["skipped"], (dataset, name, metrics)
            continue
        assert 0.0 <= metrics["validity"] <= 1.0, (dataset, name)
        if metrics["validity"] > 0:
            assert metrics["violations"] == 0, (dataset, name, metrics["violations"])
        else:  # means over valid counterfactuals: none here
            assert math.isnan(metrics["violations"]), (dataset, name)


@pytest.mark.parametrize("dataset", DATASETS)
def test_private_methods_run_with_their_defaults(dataset, shared_data):
    _check(_sweep(dataset, "logistic", FAST), dataset, "logistic")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["logistic", "mlp"])
@pytest.mark.parametrize("dataset", DATASETS)
def test_every_method_runs_with_its_defaults(dataset, model, shared_data):
    table = _sweep(dataset, model, RECOURSE_METHODS)
    assert set(table) == set(RECOURSE_METHODS)
    _check(table, dataset, model)
