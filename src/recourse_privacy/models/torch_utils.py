"""Small PyTorch helpers shared by the torch-backed models (imported lazily)."""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from recourse_privacy.errors import InvalidInputError


class _SqueezeLogit(nn.Module):
    """Wraps a network whose output is (n, 1) or (n, 2) logits into a (n,) favourable logit."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if out.ndim == 2 and out.shape[1] == 2:
            return out[:, 1] - out[:, 0]
        return out.reshape(out.shape[0])


#: guards :func:`torch_threads`' bookkeeping: torch's thread count is one process-wide setting
_THREADS_LOCK = threading.Lock()
_THREADS_HELD: list[int] = []  # the counts asked for by the blocks now running, in any Python thread
_THREADS_SAVED: list[int] = []  # the count before the first of them


@contextmanager
def torch_threads(n: int = 1):
    """Run a block with at most ``n`` intra-op threads, then restore the previous setting; safe in concurrent threads.

    Training the paper's small networks on mini-batches is dominated by per-step overhead;
    one thread per process is faster than two fighting over the same cores, and leaves the
    other core to a parallel shadow-model worker.

    Torch's thread count is one setting for the process (with OpenMP, the default each new thread
    starts from), so two Python threads that each set and restore it race: the first to leave would
    restore two threads under the other's block (reductions split differently: other bits). Here the
    blocks running in any thread share one reference count under a lock: the count in effect is the
    smallest asked for while any block runs (1 while any holder wants 1), a block whose count is
    already in effect makes no call, and the last block to leave restores the count from before the
    first. A thread started inside a block (a worker of a pool) starts with the block's count.
    """
    if int(n) < 1:
        raise InvalidInputError(f"n must be a positive number of threads; got {n!r}")
    with _THREADS_LOCK:
        if not _THREADS_HELD:
            _THREADS_SAVED[:] = [torch.get_num_threads()]
        _THREADS_HELD.append(int(n))
        _set_threads(min(_THREADS_HELD))
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_HELD.remove(int(n))
            _set_threads(min(_THREADS_HELD) if _THREADS_HELD else _THREADS_SAVED[0])


def _set_threads(n: int) -> None:
    """``torch.set_num_threads(n)`` in this thread, where its count is not ``n`` already (no call: nothing to race)."""
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def seeded_linear(n_in: int, n_out: int, generator: torch.Generator, dtype=None) -> nn.Linear:
    """``nn.Linear(n_in, n_out)`` with torch's own initialisation (``reset_parameters``: Kaiming-uniform weights,
    uniform biases in +-1/sqrt(fan_in)) drawn from ``generator``, never torch's global one.

    Layers built one after another from a generator seeded with ``s`` hold the numbers of torch's global generator
    seeded with ``s``, and nothing else draws from it: safe where other Python threads build or draw at the same
    time (reference worlds fitted side by side). With ``torch.manual_seed`` under ``fork_rng``, two threads could
    re-seed the global generator under each other, and the networks moved with the threads' timing.
    """
    layer = torch.nn.utils.skip_init(nn.Linear, n_in, n_out, dtype=dtype)
    with torch.no_grad():
        nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
        nn.init.uniform_(layer.bias, -1 / math.sqrt(n_in), 1 / math.sqrt(n_in), generator=generator)
    return layer


def linear_module(coef: np.ndarray, intercept: float) -> nn.Module:
    """A frozen float64 linear layer with the given weights, returning (n,) logits."""
    layer = nn.Linear(coef.shape[0], 1, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(coef, dtype=torch.float64).reshape(1, -1))
        layer.bias.fill_(float(intercept))
    layer.requires_grad_(False)
    return _SqueezeLogit(layer).eval()


def logit_module(net: nn.Module) -> nn.Module:
    """A user's network (outputs (n,), (n, 1) or (n, 2) logits) as a (n,) favourable logit."""
    return _SqueezeLogit(net).eval()


@torch.no_grad()
def batched_logits(module: nn.Module, X: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    """Run ``module`` on ``X`` in chunks, on the module's device, and return float64 logits (numpy).

    A ``Linear``/``ReLU`` chain (the paper's MLPs) runs through :func:`chain_logits`: the same
    operations on blocks that stay in cache, equal to ``module(X)`` within
    :func:`chain_rounding_bound`.
    """
    layers = linear_chain(module)
    if layers is not None:
        return chain_logits(layers, X).double().cpu().numpy()
    p = next(module.parameters())
    out = [
        module(torch.as_tensor(X[i : i + batch_size], dtype=p.dtype, device=p.device))
        for i in range(0, len(X), batch_size)
    ]
    return torch.cat(out).double().cpu().numpy() if out else np.zeros(0)


def module_on_device(module: nn.Module, device: str | None = None) -> nn.Module:
    """``module`` on ``device`` (None: the current :func:`~recourse_privacy.models.device.use_device` block).

    The module itself where it is already there; else a copy moved there, so that a fitted
    model's own network never changes device.
    """
    import copy

    from recourse_privacy.models.device import resolve_device

    dev = resolve_device(device)
    p = next(module.parameters(), None)
    if p is None or p.device == dev:
        return module
    return copy.deepcopy(module).to(dev)


#: activations (rows x width) per block of :func:`chain_logits`: 1 MiB of float32, which stays in a core's L2 cache
BLOCK_ELEMENTS = 1 << 18


def _block_rows(width: int, cap: int = 8192) -> int:
    """Rows per block: a power of two (so that blocks tile the 8,192-row chunks of the module path, whose
    matrix products treat a chunk's last few rows with other kernels) with ``rows * width <= BLOCK_ELEMENTS``."""
    rows = max(1, BLOCK_ELEMENTS // max(width, 1))
    return min(cap, 1 << (rows.bit_length() - 1))


def linear_chain(module: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """``(weight, bias)`` of each layer when ``module`` is a (n,) logit over ``Linear, ReLU, ..., Linear(., 1)``; else None.

    The paper's MLPs (:class:`~recourse_privacy.models.mlp.MLPModel`) and any user network of
    that form qualify; anything else (other activations, two-logit outputs, missing biases) is
    None and runs as the module itself.
    """
    net = module.net if isinstance(module, _SqueezeLogit) else None
    if not isinstance(net, nn.Sequential) or not len(net) % 2:
        return None
    layers = []
    for k, layer in enumerate(net):
        if k % 2:
            if type(layer) is not nn.ReLU:
                return None
        elif type(layer) is not nn.Linear or layer.bias is None:
            return None
        else:
            layers.append((layer.weight.detach(), layer.bias.detach()))
    if layers[-1][0].shape[0] != 1:
        return None
    return layers


def _chain_rest(layers, h: torch.Tensor, out: torch.Tensor, bufs) -> None:
    """Layers 2.. of a chain on first-layer pre-activations ``h`` (m, width), written into ``out`` (m, 1)."""
    h.relu_()
    for (W, b), buf in zip(layers[1:-1], bufs):
        h = torch.addmm(b, h, W.T, out=buf[: len(h)]).relu_()
    W, b = layers[-1]
    torch.addmm(b, h, W.T, out=out)


def _buffers(layers, rows: int, like: torch.Tensor) -> list[torch.Tensor]:
    return [torch.empty(rows, W.shape[0], dtype=like.dtype, device=like.device) for W, _ in layers[:-1]]


@torch.no_grad()
def chain_logits(layers, X) -> torch.Tensor:
    """Logits (n,) of a :func:`linear_chain` on the rows of ``X`` (array or tensor), in the layers' dtype and device.

    The module's own operations (``addmm`` then ``relu``, layer by layer) on blocks of rows whose
    activations fit in cache (:data:`BLOCK_ELEMENTS`), into buffers allocated once, without the
    memory traffic of ``module(X)``. The BLAS may block and order a product's sums differently
    for other row counts or thread counts, so the values equal ``module(X)``'s within
    :func:`chain_rounding_bound`, not always bit for bit; :meth:`decision_function` and
    :meth:`search_logits` both come from here, so a search and its final check agree exactly.
    """
    with torch_threads(1):  # many small products: one thread, no waiting on a busy second core
        return _chain_logits(layers, X)


def _chain_logits(layers, X) -> torch.Tensor:
    W0 = layers[0][0]
    X = torch.as_tensor(X, dtype=W0.dtype, device=W0.device)
    out = torch.empty(len(X), 1, dtype=W0.dtype, device=W0.device)
    if len(layers) == 1:  # a single Linear(d, 1): the module's chunks of 8,192 rows
        for lo in range(0, len(X), 8192):
            torch.addmm(layers[0][1], X[lo : lo + 8192], W0.T, out=out[lo : lo + 8192])
        return out.reshape(len(X))
    rows = _block_rows(max(W.shape[0] for W, _ in layers))
    bufs = _buffers(layers, rows, W0)
    W, b = layers[0]
    for lo in range(0, len(X), rows):
        h = torch.addmm(b, X[lo : lo + rows], W.T, out=bufs[0][: min(rows, len(X) - lo)])
        _chain_rest(layers, h, out[lo : lo + rows], bufs[1:])
    return out.reshape(len(X))


@torch.no_grad()
@torch.no_grad()
def chain_logits_and_input_grad(layers, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (n,) of a :func:`linear_chain` at the rows of ``X`` (n, d) and each logit's gradient in its row (n, d).

    The forward pass is :func:`chain_logits`'s (blocks of rows that stay in cache). The backward pass is
    written out: with ReLU masks M_l = 1[h_l > 0] and output weights w, dz/dx = M_1 ((M_2 (... (M_L w) ...)
    W_2) ...) W_1 row by row, the output weights folded into the last hidden layer's weights once
    (M_L * w) W_L = M_L (diag(w) W_L). One pass over each block's activations instead of autograd's
    (n, width) temporaries, which do not fit in cache: 4.6x less time per SCFE iteration on 3,194 HELOC
    rows at width 1,000 (``benchmarks/roofline.py``). Equal to :mod:`torch.autograd`'s gradient up to
    float rounding (tested). Runs in the caller's torch threads.
    """
    W0 = layers[0][0]
    X = torch.as_tensor(X, dtype=W0.dtype, device=W0.device)
    n, d = X.shape
    z = torch.empty(n, 1, dtype=W0.dtype, device=W0.device)
    if len(layers) == 1:  # a linear logit: one gradient for every row
        torch.addmm(layers[0][1], X, W0.T, out=z)
        return z.reshape(n), W0.expand(n, d).clone()
    hidden = layers[:-1]
    w_out = layers[-1][0][0]
    folded = w_out[:, None] * hidden[-1][0]  # diag(w) W_L: (h_L, h_{L-1} or d)
    rows = n if X.device.type != "cpu" else _block_rows(max(W.shape[0] for W, _ in hidden))
    acts = _buffers(layers, min(rows, n), W0)
    masks = _buffers(layers, min(rows, n), W0)
    gT = torch.empty(d, n, dtype=W0.dtype, device=W0.device)  # the products' cheaper layout: (d, h) x (h, m)
    for lo in range(0, n, rows):
        m = min(rows, n - lo)
        a = X[lo : lo + m]
        for (W, b), buf, mask in zip(hidden, acts, masks):
            a = torch.addmm(b, a, W.T, out=buf[:m]).relu_()
            torch.gt(a, 0, out=mask[:m])
        W, b = layers[-1]
        torch.addmm(b, a, W.T, out=z[lo : lo + m])
        if len(hidden) == 1:
            torch.mm(folded.T, masks[0][:m].T, out=gT[:, lo : lo + m])
            continue
        D = masks[-1][:m] @ folded  # dz/d(input of the last hidden layer), then back through the others
        for k in range(len(hidden) - 2, 0, -1):
            D = D.mul_(masks[k][:m]) @ hidden[k][0]
        D.mul_(masks[0][:m])
        torch.mm(hidden[0][0].T, D.T, out=gT[:, lo : lo + m])
    return z.reshape(n), gT.T.contiguous()  # row-major like X: a fused optimizer pairs elements by memory


def shifted_chain_logits(layers, X: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logits (n, s) of a :func:`linear_chain` at every ``X[i] + offsets[j]``, and a bound (n,) on their float error.

    The first layer is linear, so its pre-activations are ``(W x_i + b) + W o_j``: two small
    products instead of one over all n * s points, then the other layers on blocks of rows.
    The bound holds for the difference to the module's own value at the point ``x_i + o_j``
    (rounded to the layers' dtype): twice the forward error bound ``gamma_k * |W| ... |x|`` of
    every layer (Higham 2002, section 3.5, ``gamma_k = k u / (1 - k u)``), so a logit below
    ``-bound`` is one the model rejects.
    """
    with torch_threads(1):  # many small operations: one thread, no waiting on a busy second core
        return _shifted_chain_logits(layers, X, offsets)


def _shifted_chain_logits(layers, X: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    W0 = layers[0][0]
    dtype, device = W0.dtype, W0.device
    x = torch.as_tensor(X, dtype=dtype, device=device)
    o = torch.as_tensor(offsets, dtype=dtype, device=device)
    n, s = len(x), len(o)
    W, b = layers[0]
    A = torch.addmm(b, x, W.T)  # (n, width)
    # magnitudes for the error bound: |W1| |x| + |W1| max_j |o_j| + |b1| (the max taken per coordinate, which
    # bounds it from above), then through |W| of every layer
    mag = x.abs() @ W.abs().T + W.abs() @ o.abs().amax(0) + b.abs()
    u = torch.finfo(dtype).eps / 2
    gamma = 0.0
    k = W.shape[1] + 4  # terms of the first layer, the offset's sum and the inputs' rounding
    for W_, b_ in layers[1:]:
        gamma += k * u / (1 - k * u)
        mag = mag @ W_.abs().T + b_.abs()
        k = W_.shape[1] + 4  # its fan-in, the bias, and (one hidden layer) the folded sum's three parts
    gamma += k * u / (1 - k * u)
    bound = (4.0 * gamma * mag.reshape(n)).double().cpu().numpy()  # twice the bound of each of the two computations
    if len(layers) == 1:  # a single Linear(d, 1)
        return (A + (o @ W.T).T).double().cpu().numpy(), bound
    if len(layers) == 2 and device.type == "cpu":  # one hidden layer (the paper's MLP): stable units folded
        return folded_hidden_logits(A, W @ o.T, layers[1][0][0], layers[1][1]).double().numpy(), bound
    B = o @ W.T  # (s, width)

    width = max(W_.shape[0] for W_, _ in layers)
    rows = max(1, BLOCK_ELEMENTS // (width * max(s, 1)))
    buf = torch.empty(rows, s, W.shape[0], dtype=dtype, device=device)
    bufs = _buffers(layers[1:], rows * s, W0)
    out = torch.empty(n, s, 1, dtype=dtype, device=device)
    for lo in range(0, n, rows):
        m = min(rows, n - lo)
        h = torch.add(A[lo : lo + m, None, :], B[None], out=buf[:m]).reshape(m * s, -1)
        _chain_rest(layers, h, out[lo : lo + m].reshape(m * s, 1), bufs)
    return out.reshape(n, s).double().cpu().numpy(), bound


#: a row's unstable units are gathered (and only they computed) where they are fewer than this share of the layer:
#: a gathered unit costs three passes over its samples (gather, add-ReLU, product), an ungathered one two
GATHER_SHARE = 0.6
#: elements (units x samples) of one block of the screen's elementwise part: 4 MiB of float32 (16 MiB ran ~1.7x slower here: out of cache)
SCREEN_BLOCK = 1 << 20
#: rows are padded to a multiple of this many unstable units, so that rows of one multiple share a block
UNIT_QUANTUM = 16


def folded_hidden_logits(A: torch.Tensor, Bt: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``b + sum_k w_k relu(A[i, k] + Bt[k, j])`` (n, s): one hidden ReLU layer's logits at every row of ``A`` and column of ``Bt``.

    Growing Spheres' pre-activations at ``x_i + o_j`` are ``A[i] + Bt[:, j]`` (:func:`shifted_chain_logits`).
    Over one shell's offsets, ``Bt[k]`` lies in ``[lo_k, hi_k]`` (its least and largest value); a unit
    with ``A[i, k] >= -lo_k`` is active at every sample of row i and one with ``A[i, k] <= -hi_k`` at
    none (the stable ReLUs of Tjeng et al. 2019; in floating point too, as rounding is
    monotone). The active ones are linear, ``w_k (A[i, k] + B[j, k])``: all rows' share is one matrix
    product ``(w * active) @ Bt``; the inactive ones add nothing. Only each row's unstable units
    are computed elementwise (``relu(A + B)``, fused), with no loop over rows: rows with fewer than
    :data:`GATHER_SHARE` of the layer unstable are sorted by their count, padded to a multiple of
    :data:`UNIT_QUANTUM` units (weight 0) and taken in blocks of equal width, each block one gather of
    ``Bt``'s rows, one add-ReLU and one batched product (``bmm``); rows with more are computed over
    all units (the others weighted 0), a block of rows at a time. Blocks hold at most
    :data:`SCREEN_BLOCK` elements, or one row where a row alone holds more (the 1,000-unit MLP's
    widest rows at 1,000 samples).

    Rounding: every (i, j) is ``S_stable + S_unstable``, one addition of two sums as in the
    module's last layer, only in another order. ``S_stable`` is ``(b + sum w_k A_ik) + sum w_k B_kj``
    over the active units, ``S_unstable`` the sum of ``w_k relu(fl(A_ik + B_kj))`` over the
    unstable ones (``fl(A + B)`` is the module's own first-layer sum, inside that layer's share
    of the bound). A term of the first kind is rounded once as a product and at most
    ``n_active + 2`` times as an addend, one of the second kind at most ``1 + n_unstable``
    times; padding and inactive units add exact zeros. As ``n_active + n_unstable <= fan-in``,
    every term sees at most fan-in + 3 roundings, and splitting ``w_k (A + B)`` in two products
    keeps each term's magnitude within ``|w_k| (|A_ik| + max_j |B_kj|)``, the magnitude the bound
    uses, so the error stays within the ``gamma_{fan-in + 4}`` of :func:`shifted_chain_logits`'s
    last layer (Higham 2002, section 3.1, whatever the order of the sums).
    """
    n, h = A.shape
    lo, hi = Bt.amin(1), Bt.amax(1)  # not torch.aminmax, which is ~15x slower along rows on the CPU
    active = A >= -lo
    unstable = ~active & (A > -hi)
    w_act = torch.where(active, w, 0.0)
    out = torch.addmm(b + (w_act * A).sum(1, keepdim=True), w_act, Bt)  # the stable part of every row
    counts = unstable.sum(1)
    full = counts >= GATHER_SHARE * h
    _add_gathered(out, A, Bt, w, unstable & ~full[:, None], counts.masked_fill(full, 0))
    rows = torch.nonzero(full)[:, 0]
    if len(rows):  # most units unstable: all of them, the stable ones weighted 0 (no gather)
        _add_dense(out, rows, A, Bt, torch.where(unstable[rows], w, 0.0))
    return out


def _add_gathered(out: torch.Tensor, A: torch.Tensor, Bt: torch.Tensor, w: torch.Tensor, unstable, counts) -> None:
    """``out[i] += sum_{k unstable in row i} w_k relu(A[i, k] + Bt[k])`` for rows with ``counts`` of them, padded blocks."""
    s = Bt.shape[1]
    level = (counts + (UNIT_QUANTUM - 1)) // UNIT_QUANTUM  # a row's padded width, in quanta
    order = torch.argsort(level, stable=True)
    order = order[level[order] > 0]
    if not len(order):
        return
    c = counts[order]
    r, units = torch.nonzero(unstable[order], as_tuple=True)  # row-major: each row's units in a run
    pos = torch.arange(len(r)) - (torch.cumsum(c, 0) - c)[r]  # a unit's place in its row's run
    levels, sizes = torch.unique_consecutive(level[order], return_counts=True)
    width = int(levels[-1]) * UNIT_QUANTUM
    idx = torch.zeros(len(order), width, dtype=torch.int64)  # padding: unit 0, weight 0
    a = torch.zeros(len(order), width, dtype=A.dtype)
    wp = torch.zeros(len(order), width, dtype=A.dtype)
    idx[r, pos], a[r, pos], wp[r, pos] = units, A[order[r], units], w[units]
    res = torch.empty(len(order), s, dtype=A.dtype)
    buf = torch.empty(max(SCREEN_BLOCK, width * s), dtype=A.dtype)
    add_relu = torch.ops.aten._add_relu.out  # relu(x + y) in one pass
    first = 0
    for lev, size in zip(levels.tolist(), sizes.tolist()):
        U = lev * UNIT_QUANTUM
        per = max(1, SCREEN_BLOCK // (U * s))  # rows of one block
        for i in range(first, first + size, per):
            j = min(i + per, first + size)
            G = torch.index_select(Bt, 0, idx[i:j, :U].reshape(-1), out=buf[: (j - i) * U * s].view((j - i) * U, s))
            add_relu(G, a[i:j, :U].reshape(-1, 1), out=G)
            torch.bmm(wp[i:j, None, :U], G.view(j - i, U, s), out=res[i:j, None])
        first += size
    out[order] += res


def _add_dense(out: torch.Tensor, rows: torch.Tensor, A: torch.Tensor, Bt: torch.Tensor, w_rows: torch.Tensor) -> None:
    """``out[rows] += w_rows @ relu(A[rows, :, None] + Bt)`` (each row its own weights), blocks of rows."""
    h, s = Bt.shape
    per = max(1, SCREEN_BLOCK // (h * s))
    buf = torch.empty(min(per, len(rows)) * h * s, dtype=A.dtype)
    for lo in range(0, len(rows), per):
        r = rows[lo : lo + per]
        G = torch.ops.aten._add_relu.out(Bt, A[r, :, None], out=buf[: len(r) * h * s].view(len(r), h, s))
        out[r] += torch.bmm(w_rows[lo : lo + per, None, :], G)[:, 0]


def chain_rounding_bound(layers, X) -> np.ndarray:
    """A bound (n,) on the difference between any two evaluations of a :func:`linear_chain` at the rows of ``X``.

    Two computations in the layers' dtype that differ only in how each product's sums are blocked
    and ordered (other row blocks, thread counts or BLAS kernels) each round a layer by at most
    ``gamma_k (|W| |h| + |b|)`` with ``k = fan_in + 1`` (Higham 2002, section 3.5, whatever the
    order of the sums); errors already made carry through ``|W|`` (ReLU is 1-Lipschitz) and widen
    the magnitudes they act on. Both computations start from the same rounded input, so the
    difference is at most twice each one's distance to the exact value. Evaluated in float64.
    """
    W0 = layers[0][0]
    mag = np.abs(np.asarray(torch.as_tensor(X, dtype=W0.dtype).double().cpu().numpy()))
    err = np.zeros_like(mag)
    for W, b in layers:
        Wa, ba = np.abs(_np64(W)), np.abs(_np64(b))
        gam = _gamma(W.shape[1] + 1, W.dtype)
        err = (err @ Wa.T) + gam * ((mag + err) @ Wa.T + ba)
        mag = mag @ Wa.T + ba
    return 2.0 * err.reshape(len(mag))


def _gamma(k: int, dtype) -> float:
    """Higham's gamma_k = k u / (1 - k u) for ``dtype`` (2002, section 3.1): the relative error bound of a k-term sum."""
    u = torch.finfo(dtype).eps / 2
    return k * u / (1 - k * u)


@torch.no_grad()
def affine_chain_logits(layers, H: np.ndarray, A: np.ndarray, a0: np.ndarray, h_err: np.ndarray):
    """Logits (m, s) of a :func:`linear_chain` at the points ``A @ H[i, j] + a0``, and bounds (m, s) on their error.

    For searches whose candidates are an affine image of a short code (a VAE decoder's last hidden
    layer: C-CHVAE): the first layer folds into ``M = W1 A`` (width x q) and ``m0 = W1 a0 + b1``, so
    each candidate costs a product with q columns instead of d. The bound covers the difference to
    the module's own logit at the float64 point ``A @ H'[i, j] + a0`` cast to the layers' dtype, for
    any codes ``H'`` within ``h_err[i]`` (m, q) of ``H`` (the caller's own evaluation of the codes).
    Each layer of either computation rounds by at most ``gamma_k (|W| |input| + |b|)`` (Higham
    2002, section 3.5; the first layers: ``gamma_{d+4}`` and ``gamma_{q+6}``, which also cover the
    casts); those errors carry through ``|W|`` of the later layers. Every magnitude before the last
    layer is affine in ``|H|`` (``|W1||A| |h| + |W1||a0| + |b1|``, then through ``|W|``), so it is
    evaluated per candidate from q numbers; the last layer's is the candidate's own ``|w| relu(.)``,
    computed beside its logit. The sum is doubled.
    """
    with torch_threads(1):
        return _affine_chain_logits(layers, H, A, a0, h_err)


def _np64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def _affine_chain_logits(layers, H, A, a0, h_err):
    W1, b1 = layers[0]
    dtype, device = W1.dtype, W1.device
    m, s, q = H.shape
    W64, b64 = _np64(W1), _np64(b1)
    fused = [
        (
            torch.as_tensor(W64 @ A, dtype=dtype, device=device),
            torch.as_tensor(W64 @ a0 + b64, dtype=dtype, device=device),
        )
    ]
    # magnitudes of the first layer's pre-activations, affine in |h|: G |h| + g0
    G, g0 = np.abs(W64) @ np.abs(A), np.abs(W64) @ np.abs(a0) + np.abs(b64)
    gam = _gamma(W1.shape[1] + 4, dtype) + _gamma(q + 6, dtype)  # the two computations' first layers
    EG, Eg0, D = gam * G, gam * g0, G  # rounding so far (affine in |h|); D: how the codes' own error h_err carries
    for k, (W_, b_) in enumerate(layers[1:], start=1):
        Wa, ba = np.abs(_np64(W_)), np.abs(_np64(b_))
        EG, Eg0, D = Wa @ EG, Wa @ Eg0, Wa @ D
        if k < len(layers) - 1:  # a middle layer: its own rounding on its magnitude (the last one's is per candidate)
            G, g0 = Wa @ G, Wa @ g0 + ba
            gam = 2.0 * _gamma(W_.shape[1] + 2, dtype)
            EG, Eg0 = EG + gam * G, Eg0 + gam * g0
    Ht = torch.as_tensor(H).reshape(m * s, q)  # float32 or float64; the per-candidate part in its dtype, 1e-5 spare
    per = (Ht.abs() @ torch.as_tensor(EG[0], dtype=Ht.dtype)).double().numpy() * (1 + 1e-5)
    bound = per.reshape(m, s) + (h_err @ EG[0] + Eg0[0])[:, None]
    bound = 2.0 * bound + 2.0 * (h_err @ D[0])[:, None]
    if len(layers) == 1:  # a single Linear(d, 1): its rounding is the first layer's
        logits = _chain_logits(fused, Ht)
        return logits.reshape(m, s).double().cpu().numpy(), bound
    # the last layer gives the logit and, in a second output, its own magnitude |w| relu(.) + |b|
    W_L, b_L = layers[-1]
    out = _two_output_chain(fused + list(layers[1:-1]), torch.cat([W_L, W_L.abs()]), Ht)
    out += torch.cat([b_L, b_L.abs()])[:, None]
    out = out.double().cpu().numpy()
    bound += 2.0 * (2.0 * _gamma(W_L.shape[1] + 2, dtype)) * out[1].reshape(m, s)
    return out[0].reshape(m, s), bound


def _two_output_chain(layers, W_last: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``W_last @ relu(chain(X)).T`` (2, n) without its bias: the Linear/ReLU ``layers`` on cache-sized blocks.

    The last product is taken as (2, width) x (width, rows), which is faster here than the
    module's (rows, width) x (width, 2) for so few outputs.
    """
    X = torch.as_tensor(X, dtype=W_last.dtype, device=W_last.device)
    rows = _block_rows(max(W.shape[0] for W, _ in layers))
    bufs = _buffers(layers + [(W_last, None)], rows, W_last)
    out = torch.empty(W_last.shape[0], len(X), dtype=W_last.dtype, device=W_last.device)
    for lo in range(0, len(X), rows):
        n = min(rows, len(X) - lo)
        h = X[lo : lo + n]
        for (W, b), buf in zip(layers, bufs):
            h = torch.addmm(b, h, W.T, out=buf[:n]).relu_()
        torch.mm(W_last, h.T, out=out[:, lo : lo + n])
    return out
