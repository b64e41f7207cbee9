"""PrivRecourse (Pentyala et al. 2023): DP clustering, a published recourse graph, multi-step paths, baselines.

- :mod:`.clustering`: convergent DP k-means (spec sec. 3.3, every open reading a parameter) and
  diffprivlib's ``KMeans``;
- :mod:`.ledger`: the budget ledger written beside every release;
- :mod:`.baselines`: per-record Laplace noise and MST synthetic data (mbi);
- :mod:`.graph`: the graph on published nodes and Algorithm 2 for whole batches;
- :mod:`.artefact`: the published artefact, saved as arrays + JSON (never pickle);
- :mod:`.core`: :class:`PrivRecourse`, the publisher and registered recourse methods
  ``privrecourse``, ``privrecourse-laplace``, ``privrecourse-mst``, ``privrecourse-data``.
"""

from recourse_privacy.accounting import ReleaseBudget
from recourse_privacy.privrecourse.artefact import ARTEFACT_VERSION, PublishedGraph, load_artefact
from recourse_privacy.privrecourse.clustering import ConvergentDPKMeans, DiffprivlibKMeans
from recourse_privacy.privrecourse.core import (
    SOURCES,
    PrivRecourse,
    PrivRecourseData,
    PrivRecourseLaplace,
    PrivRecourseMST,
)
from recourse_privacy.privrecourse.graph import build_graph, recourse_paths
from recourse_privacy.privrecourse.ledger import (
    __getattr__ as __getattr__,  # former names BudgetLedger, LedgerEntry: warn
)
from recourse_privacy.privrecourse.scaling import PublicScaler

__all__ = [
    "ARTEFACT_VERSION",
    "ConvergentDPKMeans",
    "DiffprivlibKMeans",
    "PrivRecourse",
    "PrivRecourseData",
    "PrivRecourseLaplace",
    "PrivRecourseMST",
    "PublicScaler",
    "PublishedGraph",
    "ReleaseBudget",
    "SOURCES",
    "build_graph",
    "load_artefact",
    "recourse_paths",
]
