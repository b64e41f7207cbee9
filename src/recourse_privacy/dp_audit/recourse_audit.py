"""The empirical epsilon bound of a private recourse method's own release, beside its claim (``audit --dp-audit``).

A private recourse method publishes a release once (PrivRecourse's DP k-means nodes, Pentyala et al. 2023; DPC's
decoder and noisy prototypes, Yang et al. 2022) and answers from it. ``audit --recourse M --dp-audit`` audits that
release with the trained-neighbour experiment registered for it (:mod:`~recourse_privacy.dp_audit.releases`) at the
method's own claim, as ``--defense X --dp-audit`` audits a defense's (:mod:`~recourse_privacy.dp_audit.defense_audit`).
A method whose run makes no DP claim, or a claim no registered experiment reproduces, is refused with the reason
before any work. The claim covers the release only: in the audit the candidates are decided by the audit's model,
which is not part of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from recourse_privacy.errors import InvalidInputError

__all__ = ["RECOURSE_AUDITS", "RecourseClaim", "recourse_claim"]


@dataclass(frozen=True)
class RecourseClaim:
    """What ``--dp-audit`` audits for a private recourse method: the registered experiment, the claimed epsilon
    (the release's total), and what the claim covers."""

    recourse: str
    mechanism: str
    epsilon: float
    covers: str
    n_trials: int | None = None  # the fast setting's runs per neighbour (None: the recourse audits' default)


def _privrecourse(method) -> RecourseClaim | str:
    if method.clustering != "diffprivlib":
        return f"clustering={method.clustering!r} has no registered trained-neighbour experiment (diffprivlib's has)"
    if isinstance(method.bounds, str):
        return "bounds='data' reads the scaling from the private rows: the nodes make no DP claim to audit"
    return RecourseClaim(
        "privrecourse",
        "trained-privrecourse-empty",  # the test that broke diffprivlib's KMeans as it was (docs/dp-audit.md)
        float(method.epsilon),
        "the DP k-means nodes (DPLloyd through diffprivlib)",
    )


def _dpc(method) -> RecourseClaim | str:
    from recourse_privacy.dpc.core import DPCExplainer

    p = method.params
    if p["mode"] != "hardened":
        return "mode='faithful' (the paper's raw class means) makes no claim for its prototypes (docs/dpc.md)"
    budget = DPCExplainer(mode="hardened", epsilon=p["epsilon"], epsilon_prototypes=p["epsilon_prototypes"])
    if budget.epsilon_prototypes != budget.epsilon:
        return (
            f"the registered experiment splits the budget equally; epsilon={budget.epsilon:g} and "
            f"epsilon_prototypes={budget.epsilon_prototypes:g} differ (run recourse-privacy audit-dp --mechanism "
            "trained-dpc)"
        )
    return RecourseClaim(
        "dpc",
        "trained-dpc",
        float(budget.epsilon + budget.epsilon_prototypes),
        "the FM autoencoder and the noisy class prototypes",
    )


def _mst(method) -> str:
    return (
        f"MST's experiments take about a second a run, minutes at the fast audit's runs: run recourse-privacy audit-dp "
        f"--mechanism trained-mst-rows --epsilon {method.epsilon:g} (and trained-mst)"
    )


def _laplace(method) -> RecourseClaim | str:
    if isinstance(method.bounds, str):
        return "bounds='data' reads the scaling from the private rows: the noisy records make no DP claim to audit"
    return RecourseClaim(
        "privrecourse-laplace",
        "trained-privrecourse-laplace",  # neighbours that replace a record, as its claim's
        float(method.epsilon),
        "the noisy records (every record plus Laplace noise), for neighbours that replace a record",
        n_trials=5000,  # a run is a few microseconds; the tight test needs thousands to come near the claim
    )


#: recourse method name -> its claim under the run's parameters, or why there is none to audit
RECOURSE_AUDITS: dict[str, Callable[[object], RecourseClaim | str]] = {
    "privrecourse": _privrecourse,
    "dpc": _dpc,
    "privrecourse-mst": _mst,
    "privrecourse-laplace": _laplace,
}


def recourse_claim(recourse: str, params: Mapping | None = None) -> RecourseClaim:
    """The claim ``--dp-audit`` audits for ``--recourse`` run with ``params``, or one error naming why not."""
    from recourse_privacy.recourse.registry import make_recourse

    reader = RECOURSE_AUDITS.get(recourse)
    if reader is None:
        raise InvalidInputError(
            f"--dp-audit: --recourse {recourse!r} makes no DP claim ({', '.join(RECOURSE_AUDITS)} do)"
        )
    claim = reader(make_recourse(recourse, **dict(params or {})))
    if isinstance(claim, str):
        raise InvalidInputError(f"--dp-audit: --recourse {recourse}: {claim}")
    return claim
