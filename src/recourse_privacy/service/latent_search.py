"""DPC's latent counterfactual search on a published release, compiled for serving (Yang et al. 2022, sec. 4.2).

The same computation as :meth:`recourse_privacy.dpc.DPCExplainer.explain` for the release a
bundle serves (a dense-sigmoid autoencoder, a linear binary classifier, inputs already in
[0, 1]): per query, from the target prototype ``c``, Adam on ``delta`` minimises

    alpha * CE(f(x'), 1) + beta * ||x' - x||_p + gamma * ||Enc(x') - c||_p,   x' = Dec(c + delta),

and keeps the valid iterate (``f(x') > 0``) of least loss, else the last iterate. The gradients
are written out (the chain rule through the sigmoid layers) and Adam is torch's default
(Kingma and Ba 2015: betas 0.9 and 0.999, eps 1e-8, bias-corrected).

Two implementations of that one loop, in float64:

- :meth:`LatentSearch.search` (what the server runs): the whole ``max_iter``-step loop is one
  XLA program (``jax.jit`` of a ``lax.fori_loop``; jax comes with the ``mbi`` dependency), laid
  out features-by-rows so that every step's products run along the batch. A step is a few
  fused kernels instead of some fifty numpy calls, so a single applicant costs under a
  millisecond instead of tens. Batches are padded to a power of two (at most ``CHUNK`` rows;
  larger ones run in chunks), so a server compiles at most ``log2(CHUNK) + 1`` programs
  (:meth:`LatentSearch.warm`, at start);
- :meth:`LatentSearch.search_numpy`: the same loop in numpy, step by step: the reference
  (``tests/test_service.py`` checks it against the torch explainer, and the compiled search
  against both).

torch's autograd spends milliseconds per step on its own bookkeeping at these sizes (a
20-feature, 20-10 autoencoder), which made a served answer cost seconds.

``precision="float32"`` (``serve --search-precision float32``) runs the compiled loop in float32:
2.2 times the rows per CPU second, but not the same answers. 300 Adam steps amplify float32's
rounding, so a few counterfactuals in a hundred move by more than 0.01 of a feature's range;
``docs/deployment.md`` has the measured differences. The DP guarantee is the release's and does not
depend on it (the search is post-processing).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit

__all__ = [
    "CHUNK",
    "PRECISIONS",
    "LatentSearch",
    "load_latent_search",
    "private_cache_dir",
    "search_threads",
    "use_compile_cache",
]

_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8
#: the largest batch one compiled search takes; larger batches run in chunks of this size
CHUNK = 256
#: the compiled search's floating-point types, by name (the first: the default, the reference's)
PRECISIONS = {"float64": np.float64, "float32": np.float32}


def _layers(z, name: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The (weight, bias) pairs of the torch ``Sequential`` saved under ``name.<index>.weight|bias``."""
    idx = sorted({int(k.split(".")[1]) for k in z.files if k.startswith(name + ".")})
    return tuple((np.asarray(z[f"{name}.{i}.weight"], np.float64), np.asarray(z[f"{name}.{i}.bias"])) for i in idx)


def _forward(layers, x: np.ndarray) -> list[np.ndarray]:
    acts = [x]
    for W, b in layers:
        acts.append(expit(acts[-1] @ W.T + b))
    return acts


def _backward(layers, acts: list[np.ndarray], g: np.ndarray) -> np.ndarray:
    """dL/d(input) of a dense-sigmoid stack from dL/d(output)."""
    for (W, _), a in zip(reversed(layers), reversed(acts[1:])):
        g = (g * a * (1.0 - a)) @ W
    return g


def _norm_and_grad(x: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Row norms and their gradients (0 where the norm is 0, as torch's subgradient)."""
    if p == 1:
        return np.abs(x).sum(1), np.sign(x)
    n = np.sqrt((x * x).sum(1))
    return n, np.divide(x, n[:, None], out=np.zeros_like(x), where=n[:, None] > 0)


@dataclass(frozen=True)
class LatentSearch:
    """A published DPC release as arrays: the autoencoder's layers, the prototypes and the search's parameters."""

    encoder: tuple
    decoder: tuple
    prototypes: np.ndarray
    alpha: float
    beta: float
    gamma: float
    norm: str
    lr: float
    max_iter: int
    precision: str = "float64"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            from recourse_privacy.errors import InvalidInputError

            raise InvalidInputError(f"search precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")

    @functools.cached_property
    def _arrays(self) -> tuple:
        """The encoder's and decoder's layers and the prototypes in the compiled search's type."""
        dt = PRECISIONS[self.precision]
        cast = lambda layers: tuple((W.astype(dt), b.astype(dt)) for W, b in layers)  # noqa: E731
        return cast(self.encoder), cast(self.decoder), self.prototypes.astype(dt)

    def search(
        self, U: np.ndarray, coef: np.ndarray, intercept: float, target: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """Counterfactuals (in [0, 1]) of the rows ``U`` for the linear classifier ``U @ coef + intercept`` (class 1
        when positive), searched from prototype ``target``; and whether each is valid (the class is ``target``).

        The compiled loop (module docstring), chunk by chunk; the same answers as :meth:`search_numpy`."""
        U = np.asarray(U, np.float64)
        starts = range(0, len(U), CHUNK)
        if len(starts) <= 1:
            return self._compiled(U, coef, intercept, target)
        one = lambda lo: self._compiled(U[lo : lo + CHUNK], coef, intercept, target)  # noqa: E731
        if threading.current_thread().name.startswith(_THREAD_NAME):  # already on a search thread: never wait on one
            parts = [one(lo) for lo in starts]
        else:  # the calling thread waits without the GIL while XLA's own threads run the program: chunks side by side
            parts = list(search_threads().map(one, starts))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def warm(self, max_rows: int = CHUNK) -> None:
        """Compile the search for every padded batch size up to ``max_rows`` now (a server, before it answers).

        One size after the other: compiled side by side from two threads, a size was once compiled
        again by a later call (a test saw it), which in a server would stall the callers of that
        moment for seconds."""
        row = np.full((1, self.decoder[-1][0].shape[0]), 0.5)  # one row of the model space's width
        for k in range((min(max_rows, CHUNK) - 1).bit_length() + 1):  # up to max_rows's padded size
            self._compiled(np.repeat(row, 1 << k, 0), np.zeros(row.shape[1]), 0.0, 1)

    def _compiled(self, U: np.ndarray, coef, intercept: float, target: int) -> tuple[np.ndarray, np.ndarray]:
        """One chunk (at most CHUNK rows) through the jitted loop, padded to a power of two with its last row."""
        import jax

        n = len(U)
        if n == 0:
            return U.copy(), np.zeros(0, bool)
        size = 1 << (n - 1).bit_length()
        Up = np.concatenate([U, np.repeat(U[-1:], size - n, 0)]) if size > n else U
        dt = PRECISIONS[self.precision]
        encoder, decoder, prototypes = self._arrays
        with jax.enable_x64(True):
            out, found = _kernel()(
                Up.T.astype(dt), prototypes[target], np.asarray(coef, dt), dt(intercept),
                dt(1.0 if target == 1 else -1.0), encoder, decoder,
                tuple(dt(x) for x in (self.alpha, self.beta, self.gamma, self.lr)), self.max_iter,
                1 if self.norm == "l1" else 2,
            )  # fmt: skip
            out, found = np.asarray(out, np.float64), np.asarray(found)
        return out.T[:n], found[:n]

    def search_numpy(
        self, U: np.ndarray, coef: np.ndarray, intercept: float, target: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` in numpy, one step at a time: the reference the compiled loop is tested against."""
        U = np.asarray(U, np.float64)
        n = len(U)
        sign = 1.0 if target == 1 else -1.0
        c = np.broadcast_to(self.prototypes[target], (n, self.prototypes.shape[1]))
        p = 1 if self.norm == "l1" else 2
        delta, m, v = np.zeros_like(c), np.zeros_like(c), np.zeros_like(c)
        best = np.full(n, np.inf)
        out = np.zeros_like(U)
        found = np.zeros(n, bool)
        w = np.asarray(coef, np.float64)
        for it in range(self.max_iter + 1):
            dec = _forward(self.decoder, c + delta)
            up = dec[-1]
            s = sign * (up @ w + intercept)  # the target class's logit minus the other's
            d_norm, d_grad = _norm_and_grad(up - U, p)
            enc = _forward(self.encoder, up)
            e_norm, e_grad = _norm_and_grad(enc[-1] - c, p)
            loss = self.alpha * np.logaddexp(0.0, -s) + self.beta * d_norm + self.gamma * e_norm
            better = (s > 0) & (loss < best)
            best[better], out[better], found[better] = loss[better], up[better], True
            if it == self.max_iter:
                break
            g_up = (self.alpha * sign * (expit(s) - 1.0))[:, None] * w + self.beta * d_grad
            g_up += _backward(self.encoder, enc, self.gamma * e_grad)
            g = _backward(self.decoder, dec, g_up)
            t = it + 1
            m = _BETA1 * m + (1 - _BETA1) * g
            v = _BETA2 * v + (1 - _BETA2) * g * g
            delta = delta - (self.lr / (1 - _BETA1**t)) * m / (np.sqrt(v) / np.sqrt(1 - _BETA2**t) + _EPS)
        out[~found] = up[~found]
        return out, found


_THREAD_NAME = "dpc-search"


@functools.cache
def search_threads():
    """One thread per core for the chunks of large batches and the pieces of a served batch (made on first use); a
    search called on one of them runs its chunks there, one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix=_THREAD_NAME)


#: the file that marks a directory as a compile cache of ours
COMPILE_CACHE_MARKER = ".recourse-privacy-compile-cache"
#: the names of jax's persistent cache entries (``jit_<function>-<sha256>-cache``, and their access times)
_JAX_ENTRY = re.compile(r"jit_\w+-[0-9a-f]{64}-(cache|atime)")


def private_cache_dir(path: str | Path) -> Path:
    """``path`` made (mode 700) where absent, and marked as ours; refused by ``--compile-cache``'s name where other
    users can write it, or where it holds files that are neither our marker nor jax's entries (a directory of the
    user's: jax would write into it, and evict from it)."""
    from recourse_privacy.errors import InvalidInputError

    path = Path(path).expanduser()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o022:
        raise InvalidInputError(
            f"--compile-cache {path}: writable by other users; compiled programs are run from it, so it must be "
            "private (chmod go-w) or another directory (or 'off')"
        )
    marker = path / COMPILE_CACHE_MARKER
    if not marker.is_file():
        foreign = sorted(p.name for p in path.iterdir() if not _JAX_ENTRY.fullmatch(p.name))
        if foreign:
            raise InvalidInputError(
                f"--compile-cache {path}: holds files that are not compiled programs ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); give a new or empty directory (or 'off')"
            )
        marker.write_text("recourse-privacy: jax's persistent compilation cache of `serve`\n")
    return path


def use_compile_cache(path: str | Path) -> Path:
    """Keep this process's compiled searches in ``path`` (jax's persistent compilation cache) and read them back.

    A server restarted on the same machine (after a kill -9, a deploy, one more worker) then loads
    its nine programs instead of compiling them: :meth:`LatentSearch.warm` took 15.9 s on a DPC
    bundle at load 4 and 1.7 s with the programs cached. Call it before the first search of the
    process. The entries are machine code that the process will run, so a directory that other
    users can write is refused (the directory is made private when created). Returns the path.
    """
    path = private_cache_dir(path)
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # all nine sizes, even the quick ones
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path


@functools.cache
def _kernel():
    """The jitted search over a features-by-rows batch (built once per process; jax imported here, not at import)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def forward(layers, x):
        acts = [x]
        for W, b, _ in layers:
            acts.append(jax.nn.sigmoid(W @ acts[-1] + b[:, None]))
        return acts

    def backward(layers, acts, g):
        for (_, _, WT), a in zip(reversed(layers), reversed(acts[1:])):
            g = WT @ (g * a * (1.0 - a))
        return g

    def norm_and_grad(x, p):
        if p == 1:
            return jnp.abs(x).sum(0), jnp.sign(x)
        n = jnp.sqrt((x * x).sum(0))
        return n, jnp.where(n > 0, x / jnp.where(n > 0, n, 1.0), 0.0)

    def search(U, c, w, intercept, sign, encoder, decoder, weights, max_iter, p):
        alpha, beta, gamma, lr = weights
        # each layer with its transpose made once, outside the loop (about a tenth faster than W.T in every step)
        encoder, decoder = (tuple((W, b, W.T) for W, b in layers) for layers in (encoder, decoder))
        C = jnp.broadcast_to(c[:, None], (c.shape[0], U.shape[1]))

        def evaluate(delta):
            dec = forward(decoder, C + delta)
            up = dec[-1]
            s = sign * (w @ up + intercept)
            d_norm, d_grad = norm_and_grad(up - U, p)
            enc = forward(encoder, up)
            e_norm, e_grad = norm_and_grad(enc[-1] - C, p)
            loss = alpha * jnp.logaddexp(0.0, -s) + beta * d_norm + gamma * e_norm
            return dec, up, s, d_grad, enc, e_grad, loss

        def keep(up, s, loss, best, out, found):
            better = (s > 0) & (loss < best)
            return jnp.where(better, loss, best), jnp.where(better, up, out), found | better

        def step(it, state):
            delta, m, v, best, out, found = state
            dec, up, s, d_grad, enc, e_grad, loss = evaluate(delta)
            best, out, found = keep(up, s, loss, best, out, found)
            g_up = (alpha * sign * (jax.nn.sigmoid(s) - 1.0)) * w[:, None] + beta * d_grad
            g = backward(decoder, dec, g_up + backward(encoder, enc, gamma * e_grad))
            t = (it + 1).astype(U.dtype)
            m = _BETA1 * m + (1 - _BETA1) * g
            v = _BETA2 * v + (1 - _BETA2) * g * g
            delta = delta - (lr / (1 - _BETA1**t)) * m / (jnp.sqrt(v) / jnp.sqrt(1 - _BETA2**t) + _EPS)
            return delta, m, v, best, out, found

        zero = jnp.zeros_like(C)
        state = (
            zero,
            zero,
            zero,
            jnp.full(U.shape[1], jnp.inf, U.dtype),
            jnp.zeros_like(U),
            jnp.zeros(U.shape[1], bool),
        )
        delta, _, _, best, out, found = lax.fori_loop(0, max_iter, step, state)
        _, up, s, _, _, _, loss = evaluate(delta)  # the last iterate: judged, never stepped from
        _, out, found = keep(up, s, loss, best, out, found)
        return jnp.where(found, out, up), found

    return jax.jit(search, static_argnames=("p",))


def load_latent_search(path: Path, meta: dict, precision: str = "float64") -> LatentSearch:
    """The release in ``path / "dpc.npz"`` with the search parameters of ``meta`` (``dpc.json``), compiled in
    ``precision`` (see :data:`PRECISIONS`)."""
    with np.load(path / "dpc.npz", allow_pickle=False) as z:
        encoder, decoder = _layers(z, "encoder"), _layers(z, "decoder")
        prototypes = np.asarray(z["prototypes"], np.float64)
    s = meta["search"]
    return LatentSearch(encoder, decoder, prototypes, float(s["alpha"]), float(s["beta"]), float(s["gamma"]),
                        str(s["norm"]), float(s["lr"]), int(s["max_iter"]), precision)  # fmt: skip
