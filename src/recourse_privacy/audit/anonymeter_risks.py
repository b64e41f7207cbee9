"""Anonymeter's three risks (Giomi et al. 2023) of a released set of counterfactuals, through the ``anonymeter`` package.

The released counterfactuals play Anonymeter's synthetic data, the owner's training rows (the
members) its original data and the held-out non-members its control set, all decoded to the
data's columns: singling out (univariate predicates), linkability over a split of the features
into two halves, and inference of ``--sensitive`` from the other columns, each a risk with its 95%
interval as Anonymeter reports it (the attack's success over the control's, a Wilson interval).

``anonymeter`` is an optional extra that pip cannot resolve beside this package: anonymeter 1.x's
metadata pins numpy < 1.27 (and pyarrow < 22), while diffprivlib 0.6.6, a core dependency, needs
numpy >= 2. Its code runs on numpy 2 (anonymeter 1.1.0 with numpy 2.4.6, numba 0.68.1 and pyarrow 26:
the tests pass), so it is installed without its pins, in an environment of its own so that ``pip
check`` stays clean in the main one (:data:`INSTALL_HINT`; the ``anonymeter`` extra brings its other
dependencies, numba and polars). Without it the risks are absent and the note says so. It is
imported here only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from recourse_privacy.attacks.release_report import AnonymeterRisk
from recourse_privacy.global_rng import numpy_global_seed

if TYPE_CHECKING:
    from recourse_privacy.audit.threats import ThreatContext

__all__ = ["INSTALL_HINT", "MAX_ATTACKS", "anonymeter_available", "anonymeter_risks", "risks_of_frames"]

#: Anonymeter's attacks per risk (capped by the released set and the control set)
MAX_ATTACKS = 500
#: the remedy where ``anonymeter`` does not import: anonymeter 1.x pins numpy < 1.27 in its metadata but runs on
#: numpy 2, which diffprivlib needs; so the extra installs its dependencies (numba, polars) and anonymeter itself
#: goes in with --no-deps, in an environment of its own (pip check would report the pins in the main one)
INSTALL_HINT = (
    "install it in its own environment (anonymeter 1.x's metadata pins numpy < 1.27, which pip cannot resolve "
    "beside diffprivlib's numpy >= 2; its code runs on numpy 2): from a checkout of recourse-privacy, "
    "python -m venv .venv-anon && .venv-anon/bin/pip install -c constraints.txt -e '.[anonymeter]' && "
    ".venv-anon/bin/pip install --no-deps anonymeter==1.1.0, then run the audit with .venv-anon/bin/python "
    "-m recourse_privacy.cli"
)


def anonymeter_available() -> tuple[bool, str]:
    """(True, "") where ``anonymeter`` imports; else (False, why)."""
    try:
        import anonymeter.evaluators  # noqa: F401
    except Exception as err:  # an ImportError, or a broken numba underneath
        return False, (
            f"Anonymeter's risks not measured: the anonymeter package does not import ({type(err).__name__}: {err}; "
            f"this environment has numpy {_numpy_version()}); {INSTALL_HINT}"
        )
    return True, ""


def _numpy_version() -> str:
    return str(np.__version__)


def risks_of_frames(ori, syn, control, secret: str | None, seed: int, n_attacks: int = MAX_ATTACKS):
    """Anonymeter's risks of ``syn`` (DataFrames with the same columns): a tuple of :class:`AnonymeterRisk`."""
    n = int(min(n_attacks, len(control), len(syn)))
    cols = [str(c) for c in ori.columns]
    ori, syn, control = (f.set_axis(cols, axis=1).reset_index(drop=True) for f in (ori, syn, control))
    with numpy_global_seed(seed):  # Anonymeter draws its targets with numpy's global generator
        return _evaluate(ori, syn, control, cols, secret, n)


def _evaluate(ori, syn, control, cols: list[str], secret: str | None, n: int) -> tuple[AnonymeterRisk, ...]:
    """Anonymeter's evaluators on the frames (numpy's global generator seeded by the caller)."""
    from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator

    out = []
    so = SinglingOutEvaluator(ori=ori, syn=syn, control=control, n_attacks=n)
    so.evaluate(mode="univariate")
    out.append(_risk("singling-out", so, n, "univariate predicates"))
    half = len(cols) // 2
    aux = (cols[:half], cols[half:])
    link = LinkabilityEvaluator(ori=ori, syn=syn, control=control, n_attacks=n, aux_cols=aux, n_neighbors=10)
    link.evaluate(n_jobs=1)
    out.append(_risk("linkability", link, n, f"{', '.join(aux[0])} | {', '.join(aux[1])}"))
    if secret is not None:
        others = [c for c in cols if c != secret]
        inf = InferenceEvaluator(ori=ori, syn=syn, control=control, aux_cols=others, secret=secret, n_attacks=n)
        inf.evaluate(n_jobs=1)
        out.append(_risk("inference", inf, n, f"secret {secret}"))
    return tuple(out)


def _risk(name: str, evaluator, n: int, detail: str) -> AnonymeterRisk:
    r = evaluator.risk(confidence_level=0.95)
    lo, hi = r.ci
    return AnonymeterRisk(name, float(r.value), float(lo), float(hi), n, detail)


def anonymeter_risks(ctx: ThreatContext, released: np.ndarray, seed: int) -> tuple[tuple[AnonymeterRisk, ...], str]:
    """The risks of the released set against the non-members as control, and a note (why none, where none)."""
    ok, why = anonymeter_available()
    if not ok:
        return (), why
    game = ctx.game
    try:
        syn = game.preprocessor.inverse_transform(released)
    except Exception as err:  # rows the preprocessing cannot decode (a normalised table, a dropped column)
        return (), f"Anonymeter's risks not measured: the released counterfactuals do not decode ({err})"
    ori = game.dataset.X.iloc[game.owner_rows]  # every row the model trained on (as deployed, beyond the draw)
    control = game.dataset.X.iloc[game.pools.nonmembers]
    risks = risks_of_frames(ori, syn, control, ctx.config.sensitive, seed)
    note = "" if ctx.config.sensitive else "Anonymeter's inference risk needs --sensitive COL (not given)"
    return risks, note
