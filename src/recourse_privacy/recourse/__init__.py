"""Recourse: the common interface, actionability constraints and the methods of the papers.

Exact linear recourse, SCFE, Growing Spheres, CCHVAE and REVISE (with their VAE), CADEX,
DiCE-style diverse counterfactuals and FACE; ``RECOURSE_METHODS`` names them all. Every
method's ``generate`` goes through one driver, :func:`generate_recourse` (see
:mod:`recourse_privacy.recourse.base`); a method writes only its search step. A method's
search norm is ``norm="l1"`` or ``"l2"`` everywhere (:func:`check_norm`).
"""

from recourse_privacy.recourse.base import (
    NORMS,
    SEARCH_NORMS,
    RecourseMethod,
    RecourseResult,
    SearchOutput,
    check_norm,
    check_supports,
    distances,
    fit_for,
    generate_recourse,
)
from recourse_privacy.recourse.cadex import CADEX
from recourse_privacy.recourse.cchvae import CCHVAE
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.dice import DiverseCounterfactuals
from recourse_privacy.recourse.face import FACE
from recourse_privacy.recourse.growing_spheres import GrowingSpheres
from recourse_privacy.recourse.linear import LinearRecourse
from recourse_privacy.recourse.registry import (
    RECOURSE_METHODS,
    check_compatible,
    check_recourse_name,
    make_recourse,
    model_capabilities,
    recourse_needs,
    register_recourse,
)
from recourse_privacy.recourse.revise import REVISE
from recourse_privacy.recourse.scfe import SCFE
from recourse_privacy.recourse.vae import VAE

__all__ = [
    "CADEX",
    "DiverseCounterfactuals",
    "FACE",
    "CCHVAE",
    "GrowingSpheres",
    "REVISE",
    "VAE",
    "ActionSet",
    "LinearRecourse",
    "NORMS",
    "RECOURSE_METHODS",
    "RecourseMethod",
    "RecourseResult",
    "SCFE",
    "SEARCH_NORMS",
    "SearchOutput",
    "check_compatible",
    "check_norm",
    "check_recourse_name",
    "check_supports",
    "distances",
    "fit_for",
    "generate_recourse",
    "make_recourse",
    "model_capabilities",
    "recourse_needs",
    "register_recourse",
]
