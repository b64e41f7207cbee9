"""What a published bundle gives the applicants it will serve, measured on the operator's own rejected rows.

``publish`` trains a private artefact; whether its answers help depends on the method and the budget (DPC's
autoencoder at a small epsilon, Laplace Recourse's noise per answer). Before serving, the operator sees the
share of rejected training rows the bundle answers with a counterfactual its model accepts, and the answers'
cost, from the same code that answers applicants (:meth:`~recourse_privacy.service.bundle.Bundle.answer`).
For a graph's answers (PrivRecourse) it also counts the nodes the answers lead to: a path ends at one node,
which every applicant sent there is told to move toward. The figures are statistics of the private rows: they are
for the operator, never written into the bundle, and not covered by its guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from recourse_privacy.metrics.intervals import clopper_pearson
from recourse_privacy.validation import RandomState, as_generator

if TYPE_CHECKING:
    import pandas as pd

    from recourse_privacy.service.bundle import Bundle

#: below this share of valid answers, ``publish`` warns
LOW_VALIDITY = 0.5
#: from this share of a graph's answers ending at one node, ``publish`` warns
CONCENTRATED = 0.5


@dataclass(frozen=True)
class ReleaseCheck:
    """The answers a bundle gives ``n_checked`` rejected training rows (drawn without replacement from
    ``n_rejected``): the share with a valid counterfactual (the bundle's model accepts it), the share with none,
    and the median cost of the valid ones (the cost the answers report)."""

    n_rejected: int
    n_checked: int
    valid_share: float
    not_found_share: float
    median_cost: float | None
    #: a graph's answers (PrivRecourse): the distinct nodes the found answers end at, the graph's nodes, and the
    #: share of the found answers at the most common end node (None for the methods that answer without a graph)
    end_nodes: int | None = None
    n_nodes: int | None = None
    top_end_share: float | None = None

    @property
    def concentrated(self) -> bool:
        """Whether at least :data:`CONCENTRATED` of a graph's found answers end at one node (a node is one profile
        every such applicant is sent toward, whatever their own)."""
        return self.top_end_share is not None and self.top_end_share >= CONCENTRATED

    @property
    def valid_ci(self) -> tuple[float, float]:
        """95% Clopper-Pearson interval of the valid share over the draw of the rows checked (conservative for a
        draw without replacement; the share itself where every rejected row was checked). It says nothing of
        the bundle's own noise: another ``--seed`` publishes another DP model, graph or autoencoder."""
        if not self.n_checked or self.n_checked == self.n_rejected:
            return self.valid_share, self.valid_share
        return clopper_pearson(round(self.valid_share * self.n_checked), self.n_checked)

    @property
    def low(self) -> bool:
        """Whether fewer than :data:`LOW_VALIDITY` of the answers are valid."""
        return self.n_checked > 0 and self.valid_share < LOW_VALIDITY

    def describe(self) -> str:
        """One line for the operator."""
        if not self.n_checked:
            return "check: the bundle's model rejects none of the training rows; nothing to check"
        cost = "n/a" if self.median_cost is None else f"{self.median_cost:.3g}"
        lo, hi = self.valid_ci
        rows = (
            "every rejected row"
            if self.n_checked == self.n_rejected
            else f"95% interval over the rows drawn {lo:.1%}-{hi:.1%}"
        )
        return (
            f"check on {self.n_checked} of the {self.n_rejected} training rows the bundle's model rejects (for you: "
            f"not in the bundle, not covered by its guarantee): {self.valid_share:.1%} answered with a counterfactual "
            f"the model accepts ({rows}), {self.not_found_share:.1%} with none; median cost of the valid ones "
            f"{cost}.{self._ends()} One bundle: its noise is one draw, another --seed publishes another"
        )

    def _ends(self) -> str:
        if self.end_nodes is None:
            return ""
        return (
            f" The found answers lead to {self.end_nodes} of the graph's {self.n_nodes} nodes ({self.top_end_share:.1%}"
            " to the most common)."
        )


def check_release(bundle: Bundle, X: pd.DataFrame, *, n_rows: int = 500, random_state: RandomState = 0) -> ReleaseCheck:
    """Answer up to ``n_rows`` rejected rows of the training frame ``X`` (seeded draw) with ``bundle`` and summarise."""
    a = bundle.schema.applicants_from_frame(X)
    rejected = np.flatnonzero(~bundle.decide(a))
    k = min(int(n_rows), len(rejected))
    if not k:
        return ReleaseCheck(len(rejected), 0, 0.0, 0.0, None)
    rows = np.sort(as_generator(random_state).choice(rejected, k, replace=False))
    answers = bundle.answer(a.take(rows))
    valid = np.array([bool(x.get("valid", False)) for x in answers])
    found = np.array([x.get("counterfactual") is not None for x in answers])
    costs = [x["cost"] for x, ok in zip(answers, valid) if ok]
    ends = _END_NODES.get(bundle.method, lambda b, a: None)(bundle, a.take(rows))
    counts = np.unique(ends, return_counts=True)[1] if ends is not None and len(ends) else None
    return ReleaseCheck(
        n_rejected=len(rejected),
        n_checked=k,
        valid_share=float(valid.mean()),
        not_found_share=float(1.0 - found.mean()),
        median_cost=float(np.median(costs)) if costs else None,
        end_nodes=None if counts is None else len(counts),
        n_nodes=None if counts is None else len(bundle.graph.nodes),
        top_end_share=None if counts is None else float(counts.max() / counts.sum()),
    )


def _graph_ends(bundle: Bundle, a) -> np.ndarray:
    """The node each found answer's path ends at (Pentyala et al. 2023, Algorithm 2), as the bundle answers."""
    paths = bundle.graph.query(bundle.schema.encode(a), model=bundle.model)
    return paths.end[paths.found]


#: method -> the end nodes of its found answers to the applicants (the methods that answer from a graph)
_END_NODES = {"privrecourse": _graph_ends}
