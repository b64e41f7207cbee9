"""DPC (Yang et al. 2022): the functional mechanism (Zhang et al. 2012), the FM autoencoder, prototypes and search.

Heavy imports (torch) happen inside the functions that train or search. ``dpc.recourse``
registers the method ``dpc`` in the recourse registry.
"""

from recourse_privacy.deprecation import renamed_names
from recourse_privacy.dpc.autoencoder import FMAutoencoder, PublicBounds, fm_autoencoder_sensitivity
from recourse_privacy.dpc.core import MODES, RENAMED, DPCExplainer, DPCExplanation, Prototypes, class_prototypes
from recourse_privacy.dpc.functional import (
    FMFit,
    QuadraticObjective,
    fm_linear_regression,
    fm_logistic_regression,
    functional_mechanism,
)

__all__ = [
    "MODES",
    "DPCExplainer",
    "DPCExplanation",
    "FMAutoencoder",
    "FMFit",
    "Prototypes",
    "PublicBounds",
    "QuadraticObjective",
    "class_prototypes",
    "fm_autoencoder_sensitivity",
    "fm_linear_regression",
    "fm_logistic_regression",
    "functional_mechanism",
]

__getattr__ = renamed_names(__name__, RENAMED)
