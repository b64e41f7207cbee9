"""CCHVAE (Pawelczyk et al. 2020): growing-shell search in a VAE's latent space, for all points at once."""

from __future__ import annotations

import numpy as np

from recourse_privacy.hyperparams import Float, Int
from recourse_privacy.recourse.base import NORM_ORD, RecourseResult, SearchOutput, check_norm, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.growing_spheres import search_seed, shell_search
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.recourse.shell_certificate import decoded_rejection_floor
from recourse_privacy.recourse.vae import VAEBackedMethod, make_vae
from recourse_privacy.validation import check_positive_float, check_positive_int


@register_recourse(
    "cchvae",
    description="C-CHVAE (Pawelczyk et al.): growing-shell search in a VAE's latent space, batched",
    needs=("fitting_data",),
    cost=100,
)
class CCHVAE(VAEBackedMethod):
    """C-CHVAE (Pawelczyk, Broelemann and Kasneci 2020; Pawelczyk et al. 2023, Appendix C.2), batched.

    ``fit`` trains a :class:`~recourse_privacy.recourse.vae.VAE` on the data (in the audit:
    the owner's training set; each shadow model's copy on its own). ``generate`` encodes
    each factual to z = encode(x) and samples ``n_search_samples`` latents in the shells
    [k * step, (k + 1) * step) of the ``norm`` around z (k = 0, 1, ...), decodes them
    (immutable features are copied from the factual, as CARLA does), projects them onto the
    ``action_set`` and stops each row at the first shell where the model accepts a decoded
    point, keeping the accepted one closest to x in the input-space ``norm``. Defaults
    are CARLA's ``cchvae``: 300 samples, L1, step 0.1, 1,000 shells; the VAE's in
    ``vae_params`` (see :class:`VAE`: 8 latent dimensions, one hidden layer of 20 on each
    side, 5 epochs). Rows with no recourse after ``max_iter`` shells keep their factual,
    flagged invalid; points the model already accepts are returned unchanged. The VAE's
    training and the search draw from ``random_state`` mixed with a fingerprint of the
    fitting rows, so each world of the audit is independent and reproducible.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {"n_search_samples": Int(1, 10**7), "step": Float(0, 1e6, low_open=True), "max_iter": Int(1, 10**7)}

    def __init__(
        self,
        *,
        n_search_samples: int = 300,
        norm: str = "l1",
        step: float = 0.1,
        max_iter: int = 1000,
        vae_params: dict | None = None,
        action_set: ActionSet | None = None,
        random_state=None,
    ):
        self.n_search_samples = check_positive_int(n_search_samples, "n_search_samples")
        self.norm = check_norm(norm)
        self.step = check_positive_float(step, "step")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.vae_params = dict(vae_params or {})
        self.action_set = action_set
        self.random_state = random_state
        make_vae(self.vae_params, None)  # fail now on a bad key, not after training a model

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X``; rows without recourse keep their factual, flagged invalid."""
        return generate_recourse(
            self,
            model,
            X,
            skip_accepted=True,
            info={
                "n_search_samples": self.n_search_samples,
                "norm": self.norm,
                "step": self.step,
                "max_iter": self.max_iter,
            },
        )

    def _begin(self, model) -> int:
        """This call's search seed (this world's, set by :meth:`fit`)."""
        return search_seed(self.seed_)

    def _search(self, model, X: np.ndarray, seed: int) -> SearchOutput:
        """The shell search in the latent space around the codes of the rows of ``X`` (all rejected by the model)."""
        vae = self.vae_
        info = {"latent_dim": vae.latent_dim}
        if not len(X):
            return SearchOutput(X.copy(), np.zeros(0, dtype=np.int64), info=info)
        aset = self.action_set  # None: no projection (the unconstrained one is the identity)

        need_x = aset is not None or vae.has_immutables  # else the decoder needs the latents only

        def candidates(rows, latents):
            m, s, k = latents.shape
            x = np.repeat(X[rows], s, axis=0) if need_x else None
            out = vae.search_decode(latents.reshape(m * s, k), x)
            return (out if aset is None else aset.project(out, x)).reshape(m, s, X.shape[1])

        codes = vae.encode(X)
        X_cf, _, n_iter, skipped = shell_search(
            X,
            codes,
            candidates,
            model,
            n_samples=self.n_search_samples,
            norm=self.norm,
            step=self.step,
            max_iter=self.max_iter,
            seed=seed,
            screen=_decoded_screen(model, vae, codes) if aset is None else None,
            # shells proven to hold no accepted decoded point are skipped (none where an action set projects)
            floor=decoded_rejection_floor(model, vae, codes, NORM_ORD[self.norm]) if aset is None else None,
        )
        return SearchOutput(X_cf, n_iter, info={**info, "shells_skipped": skipped})


def _decoded_screen(model, vae, codes: np.ndarray):
    """Scores of decoded candidates without decoding them: the model's ``affine_logits`` on the decoder's last hidden layer.

    A decoded row is ``A h + a0`` (:meth:`~recourse_privacy.recourse.vae.VAE.linear_head`), so a
    model whose first layer is linear scores it with q = 20 columns instead of d; the
    candidates its bound cannot rule out are then decoded and scored by the model itself.
    None where the model or the VAE (immutable features) does not allow it, or where q >= d.
    """
    affine = getattr(model, "affine_logits", None)
    head = vae.linear_head()
    if affine is None or head is None:
        return None
    A, a0 = head
    if A.shape[1] >= A.shape[0]:  # the code is no shorter than a row: folding saves nothing
        return None

    def screen(rows, offsets):
        shifted = vae.shifted_hidden(codes[rows], offsets)
        if shifted is not None:  # one hidden layer (the default): from two small products
            H, h_err = shifted
            return affine(H, A, a0, h_err)
        Z = codes[rows, None, :] + offsets[None]  # the latents the search decodes, the same floats
        m, s, k = Z.shape
        H = vae.hidden(Z.reshape(m * s, k)).reshape(m, s, -1)
        return affine(H, A, a0, vae.hidden_error(np.abs(Z).max(axis=1)))

    return screen
