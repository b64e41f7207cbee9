"""Recourse methods by name, for the CLI and experiment specs."""
from __future__ import annotations

from recourse_privacy.recourse.linear import LinearRecourse
from recourse_privacy.recourse.scfe import SCFE
from recourse_privacy.recourse.cadex import CADEX
from recourse_privacy.recourse.dice import DiverseCounterfactuals
from recourse_privacy.recourse.face import FACE
from recourse_privacy.recourse.growing_spheres import GrowingSpheres
from recourse_privacy.recourse.cchvae import CCHVAE
from recourse_privacy.recourse.revise import REVISE
from recourse_privacy.defenses.laplace import LaplaceRecourse  # imports recourse.base lazily: no import cycle

#: name -> (class, description)
RECOURSE_METHODS: dict[str, tuple[type, str]] = {
    "linear": (LinearRecourse, "exact closed-form recourse for linear models"),
    "scfe": (SCFE, "Wachter et al. gradient search (Adam, BCE + lam * L1), batched"),
    "cadex": (CADEX, "Moore et al. constrained adversarial examples (masked Adam toward the favourable class), batched"),
    "dice": (DiverseCounterfactuals, "Mothilal et al. DiCE: k diverse counterfactuals (hinge + proximity - DPP), batched"),
    "face": (FACE, "Poyiadzi et al. FACE: shortest density-weighted paths on a graph of data points"),
    "gs": (GrowingSpheres, "Growing Spheres (Laugel et al.): random search in growing L2 (or L1) shells, batched"),
    "cchvae": (CCHVAE, "C-CHVAE (Pawelczyk et al.): growing-shell search in a VAE's latent space, batched"),
    "revise": (REVISE, "REVISE (Joshi et al.): Adam in a VAE's latent space (BCE + lam * L1), batched"),
    "laplace": (LaplaceRecourse, "Laplace Recourse (paper 001): epsilon-DP noisy score, move along w; linear models"),
}


def check_recourse_name(name: str) -> str:
    """Return ``name`` if it is a known method, else raise a ValueError listing the known ones."""
    if name not in RECOURSE_METHODS:
        raise ValueError(f"unknown recourse method {name!r}; choose one of {', '.join(RECOURSE_METHODS)}")
    return name


def make_recourse(name: str, **params):
    """A recourse method by name; ``params`` override its defaults."""
    return RECOURSE_METHODS[check_recourse_name(name)][0](**params)


def recourse_requires(name: str) -> str | None:
    """What the method needs of a model: 'linear', 'differentiable' or None."""
    return getattr(RECOURSE_METHODS[check_recourse_name(name)][0], "requires", None)
