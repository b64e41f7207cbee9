"""SCFE in many reference worlds at once: one stacked search over models of one architecture.

An audit's reference models (shadow or online, LiRA's) are MLPs of one architecture that differ
only in their weights. SCFE (Wachter et al. 2018; Pawelczyk et al. 2023, eq. 1) runs per row,
and every row of every world follows the same schedule (Adam's shared step count, the same lam
per round, the same iteration at which a row is judged), so the searches of K worlds can run
as one: the K networks' weights are stacked (K, n_in, n_out), each world's rows padded into a
(K, n, d) batch, and one iteration is a few ``torch.baddbmm`` products for all worlds instead of
the same small products K times. Each row gets the trajectory it gets alone, up to
floating-point summation order (tested against :meth:`SCFE.generate`).

Rows that reach recourse leave the batch as in :meth:`SCFE._adam`: they are recorded, and the
batch is repacked (worlds with no searching row dropped, the others' rows moved to the front,
Adam's per-element state carried) whenever its padded width can halve. The long tail of a
search (a few stubborn rows per world, up to ``max_rounds x max_iter`` iterations of tiny
products) is then one loop for all worlds, not one per world.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

import numpy as np

from recourse_privacy.recourse.base import SearchOutput

__all__ = ["ONE_THREAD_ELEMENTS", "WorldPlan", "search_stacked", "stack_chains"]

#: a batch of at most this many first-layer activations (rows x widest layer) is searched in one thread (SCFE's
#: small batches: its products take microseconds, and a second thread only waits for a core)
ONE_THREAD_ELEMENTS = 1 << 20
#: rows x widest layer x worlds of one forward-and-backward block (64 MiB of float32 activations)
BLOCK_ELEMENTS = 1 << 24
#: worlds x padded rows x features held at once (x, its start, its gradient, Adam's two moments, the output)
STATE_ELEMENTS = 1 << 24


def stack_chains(modules: Sequence) -> list[tuple] | None:
    """Each layer's weights of ``modules`` stacked: [(W^T (K, n_in, n_out), b (K, 1, n_out)), ...]; None if unstackable.

    Stackable: every module is a ``Linear, ReLU, ..., Linear(., 1)`` chain
    (:func:`~recourse_privacy.models.torch_utils.linear_chain`) of the same shapes, dtype and device.
    """
    import torch

    from recourse_privacy.models.torch_utils import linear_chain

    chains = [linear_chain(m) for m in modules]
    if not chains or any(c is None for c in chains):
        return None
    first = chains[0]
    sig = [(w.shape, w.dtype, w.device) for w, _ in first]
    if any([(w.shape, w.dtype, w.device) for w, _ in c] != sig for c in chains):
        return None
    return [
        (torch.stack([c[i][0].T for c in chains]), torch.stack([c[i][1] for c in chains]).unsqueeze(1))
        for i in range(len(first))
    ]


def _logits(layers, x):
    """(K, b) logits of the stacked chains ``layers`` at ``x`` (K, b, d); the output layer as (K, 1, h) x (K, h, b)."""
    import torch

    a = x
    for w, b in layers[:-1]:
        a = torch.baddbmm(b, a, w).relu()
    w, b = layers[-1]
    return torch.baddbmm(b, w.transpose(1, 2), a.transpose(1, 2)).squeeze(1)


def _logits_and_input_grad(layers, x):
    """Logits (K, b) of the stacked chains ``layers`` at ``x`` (K, b, d) and each logit's gradient in its row (K, b, d).

    The backward pass of :func:`~recourse_privacy.models.torch_utils.chain_logits_and_input_grad` over the stack:
    ReLU masks M_l, the output weights folded into the last hidden layer's, one batched product per layer back.
    """
    import torch

    a, masks = x, []
    for w, b in layers[:-1]:
        a = torch.baddbmm(b, a, w).relu_()
        masks.append((a > 0).to(a.dtype))
    w_out, b_out = layers[-1]  # (K, h, 1), (K, 1, 1)
    z = torch.baddbmm(b_out, w_out.transpose(1, 2), a.transpose(1, 2)).squeeze(1)
    if len(layers) == 1:  # a linear logit: its weights, every row
        return z, w_out.transpose(1, 2).expand(x.shape).contiguous()
    D = torch.bmm(masks[-1], w_out * layers[-2][0].transpose(1, 2))  # (M_L * w) W_L = M_L (diag(w) W_L)
    for k in range(len(layers) - 3, -1, -1):
        D = torch.bmm(D.mul_(masks[k]), layers[k][0].transpose(1, 2))
    return z, D


class _Batch:
    """The searching rows of some worlds, padded: iterates, starts, gradients and Adam's state, all (K', n', d)."""

    def __init__(self, method, layers, x0, active, orig_k, orig_j):
        import torch

        self.method, self.full_layers = method, layers
        self.x0, self.active, self.orig_k, self.orig_j = x0, active, orig_k, orig_j
        self.layers = [(w[orig_k], b[orig_k]) for w, b in layers]
        self.x = x0.clone().requires_grad_(True)
        self.x.grad = torch.zeros_like(x0)
        self.opt = torch.optim.Adam([self.x], lr=method.lr)

    def value_and_grad(self, lam: float):
        """Logits (K', n') at the current iterates, and the objective's gradient written into ``x.grad``.

        The gradient written out as :meth:`SCFE._adam_chain` writes it (:func:`_logits_and_input_grad`, the
        stacked form of :func:`~recourse_privacy.models.torch_utils.chain_logits_and_input_grad`), no autograd.
        """
        import torch

        K, n, d = self.x.shape
        width = max(max(w.shape[2] for w, _ in self.layers), d)
        step = max(1, BLOCK_ELEMENTS // max(K * width, 1))
        z = torch.empty(K, n, dtype=self.x.dtype, device=self.x.device)
        for s in range(0, n, step):
            xb = self.x.detach()[:, s : s + step]
            zb, dz = _logits_and_input_grad(self.layers, xb)
            grad = self.method._objective_grad(
                zb.reshape(-1), dz.reshape(-1, d), (xb - self.x0[:, s : s + step]).reshape(-1, d), lam, torch
            )
            self.x.grad[:, s : s + step] = grad.view(K, -1, d)
            z[:, s : s + step] = zb
        return z

    def step(self) -> None:
        """One Adam step of every row (those that left the search too: they are never read again), then the projection."""
        import torch

        self.opt.step()
        self.method._project(self.x, self.x0, torch)

    def repack(self) -> None:
        """Drop worlds with no searching row and move each world's searching rows to the front (Adam's state carried)."""
        import torch

        counts = self.active.sum(1)
        kept = torch.nonzero(counts > 0).squeeze(1)
        n_new = int(counts.max())
        kk, jj = torch.nonzero(self.active[kept], as_tuple=True)
        rank = (torch.cumsum(self.active[kept].long(), 1) - 1)[kk, jj]
        src_k = kept[kk]

        def moved(t, fill=0):
            new = torch.full((len(kept), n_new, *t.shape[2:]), fill, dtype=t.dtype, device=t.device)
            new[kk, rank] = t[src_k, jj]
            return new

        state = self.opt.state.get(self.x)
        x = moved(self.x.detach()).requires_grad_(True)
        x.grad = moved(self.x.grad)
        opt = torch.optim.Adam([x], lr=self.method.lr)
        if state:
            opt.state[x] = {
                "step": state["step"].clone(),
                "exp_avg": moved(state["exp_avg"]),
                "exp_avg_sq": moved(state["exp_avg_sq"]),
            }
        self.x0, self.active = moved(self.x0), moved(self.active, False)
        self.orig_j = moved(self.orig_j, -1)
        self.orig_k = self.orig_k[kept]
        self.layers = [(w[kept], b[kept]) for w, b in self.layers]
        self.x, self.opt = x, opt


def _search_group(method, layers, Xs: list[np.ndarray]) -> list[SearchOutput]:
    """:meth:`SCFE._adam` for every world's rows ``Xs[k]`` under the stacked network ``layers`` (K worlds)."""
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    w0 = layers[0][0]
    dev, dtype = w0.device, w0.dtype
    K, d = len(Xs), w0.shape[1]
    sizes = np.array([len(X) for X in Xs])
    n_max = int(sizes.max(initial=0))
    if n_max == 0:
        return [SearchOutput(X.copy(), np.zeros(0, dtype=np.int64)) for X in Xs]
    x0 = torch.zeros(K, n_max, d, dtype=dtype, device=dev)
    for k, X in enumerate(Xs):  # a loop over worlds, not rows
        x0[k, : len(X)] = torch.as_tensor(X, dtype=dtype, device=dev)
    j = torch.arange(n_max, device=dev)
    active = j[None, :] < torch.as_tensor(sizes, device=dev)[:, None]
    batch = _Batch(
        method,
        [(w.detach(), b.detach()) for w, b in layers],
        x0,
        active,
        torch.arange(K, device=dev),
        j.expand(K, n_max).clone(),
    )
    out = x0.clone()
    n_iter = torch.full((K, n_max), -1, dtype=torch.long, device=dev)
    width = max(w.shape[2] for w, _ in layers)
    one_thread, held = contextlib.ExitStack(), []

    def threads() -> None:  # small batches in one thread, as SCFE._search does (a second one only waits)
        K_, n_ = batch.x.shape[:2]
        if dev.type == "cpu" and K_ * n_ * width <= ONE_THREAD_ELEMENTS and not held:
            held.append(one_thread.enter_context(torch_threads(1)))

    def record(found, it: int) -> None:
        k, jj = torch.nonzero(found, as_tuple=True)
        ok, oj = batch.orig_k[k], batch.orig_j[k, jj]
        out[ok, oj] = batch.x.detach()[k, jj]
        n_iter[ok, oj] = it

    lam, it = method.lam, 0
    try:
        threads()
        for _ in range(method.max_rounds):
            for _ in range(method.max_iter):
                z = batch.value_and_grad(lam)
                found = batch.active & (z >= 0)
                if found.any():
                    record(found, it)
                    batch.active &= ~found
                    if not batch.active.any():
                        return _outputs(Xs, out, x0, n_iter)
                    counts = batch.active.sum(1)
                    # repacked where the padded batch shrinks by a quarter or more
                    if 4 * int((counts > 0).sum()) * int(counts.max()) <= 3 * batch.active.numel():
                        batch.repack()
                        threads()
                batch.step()
                it += 1
            lam = max(lam - method.lam_decay, 0.0)
        with torch.no_grad():
            z = _logits(batch.layers, batch.x)
        record(batch.active, -1)  # the last iterate of every row still searching
        record(batch.active & (z >= 0), it)
    finally:
        one_thread.close()  # the thread count from before (torch_threads: safe beside other threads' blocks)
    return _outputs(Xs, out, x0, n_iter)


def _outputs(Xs, out, x0, n_iter) -> list[SearchOutput]:
    """Each world's counterfactuals (``X + (x' - x0)`` in float64, as :meth:`SCFE._adam` returns them) and iterations."""
    delta = (out - x0).cpu().numpy().astype(np.float64)
    its = n_iter.cpu().numpy()
    return [SearchOutput(X + delta[k, : len(X)], its[k, : len(X)].copy()) for k, X in enumerate(Xs)]


def search_stacked(method, modules: Sequence, Xs: Sequence[np.ndarray]) -> list[SearchOutput] | None:
    """SCFE's search (``method``, an :class:`~recourse_privacy.recourse.scfe.SCFE`) of the rows ``Xs[k]`` under
    ``modules[k]`` for every k, all worlds at once; None where the modules cannot be stacked (:func:`stack_chains`).

    Worlds are searched in groups of at most :data:`STATE_ELEMENTS` padded row-features. On the CPU,
    with more than one torch thread allowed, the worlds are split into as many groups, each searched in
    one torch thread inside a Python thread of its own (as :func:`~recourse_privacy.models.batched.fit_mlps_batched`
    trains its stacks): no barrier at every small product, where torch's own threads busy-wait under load.
    A world's search does not depend on its group.
    """
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    layers = stack_chains(modules)
    if layers is None:
        return None
    Xs = [np.asarray(X, dtype=np.float64) for X in Xs]
    d = layers[0][0].shape[1]
    n_max = max((len(X) for X in Xs), default=0)
    threads = torch.get_num_threads() if layers[0][0].device.type == "cpu" else 1
    per_group = max(1, min(STATE_ELEMENTS // max(n_max * d, 1), -(-len(Xs) // threads)))
    groups = [slice(start, start + per_group) for start in range(0, len(Xs), per_group)]

    def search(group: slice) -> list[SearchOutput]:
        return _search_group(method, [(w[group], b[group]) for w, b in layers], Xs[group])

    if threads <= 1 or len(groups) <= 1:
        return [out for group in groups for out in search(group)]
    from concurrent.futures import ThreadPoolExecutor

    with torch_threads(1), ThreadPoolExecutor(max_workers=min(threads, len(groups))) as pool:
        return [out for outs in pool.map(search, groups) for out in outs]


#: mean rows per world x widest layer below which the worlds are searched stacked; above, each world alone
#: (in parallel threads). Measured (1 torch thread per search, load 8-10): 16 worlds x 1,000 rows of HELOC-like
#: data at width 1,000 cost 8.6 CPU s one world at a time and 12.1 stacked (its padding and autograd passes
#: outweigh the per-step overhead it saves); 4 worlds x ~70 rows at width 64 cost 2.1 and 0.17. Stop 34, both
#: without autograd, quiet: 8 HELOC worlds x ~3,200 rows at width 1,000 cost 1.61 CPU s each alone (its blocks of
#: rows stay in cache) and 5.65 stacked, with the same iterations.
STACK_BELOW = 1 << 17


def _search_each(method, modules: Sequence, Xs: Sequence[np.ndarray]) -> list[SearchOutput]:
    """``method._search`` of each world alone (its exact path), worlds in parallel Python threads of one torch
    thread each on the CPU (no torch barrier to busy-wait at; see :func:`search_stacked`)."""
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    threads = torch.get_num_threads() if next(modules[0].parameters()).device.type == "cpu" else 1
    run = [lambda k=k: method._adam(np.asarray(Xs[k], dtype=np.float64), modules[k]) for k in range(len(Xs))]
    if threads <= 1 or len(Xs) <= 1:
        return [f() for f in run]
    from concurrent.futures import ThreadPoolExecutor

    with torch_threads(1), ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda f: f(), run))


class WorldPlan:
    """The queries each world's model will be asked, searched for all worlds together on first use.

    ``queries[k]`` are the arrays of rows model ``models[k]`` will be asked for recourse (one call each);
    :meth:`lookup` gives the search output of one such call, or None for any other call.
    """

    def __init__(self, method, models: Sequence, queries: Sequence[Sequence[np.ndarray]]):
        self.method, self.models = method, list(models)
        self.queries = [[np.asarray(q, dtype=np.float64) for q in qs] for qs in queries]
        self.index = {id(m): k for k, m in enumerate(self.models)}
        self.outputs: list[list[SearchOutput]] | None = None
        self.failed = False
        self._lock = threading.Lock()  # worlds are queried from two Python threads (attacks/shadow.py): one search

    def _run(self) -> None:
        from recourse_privacy.models.torch_utils import module_on_device

        modules = [module_on_device(m.torch_module()) for m in self.models]
        joined = [np.vstack(qs) if qs else np.zeros((0, 0)) for qs in self.queries]
        width = max((w.shape[0] for w in modules[0].parameters() if w.ndim == 2), default=1) if modules else 1
        if np.mean([len(X) for X in joined]) * width <= STACK_BELOW:
            res = search_stacked(self.method, modules, joined)
        else:
            res = _search_each(self.method, modules, joined)
        if res is None:
            self.failed = True
            return
        self.outputs = []
        for qs, r in zip(self.queries, res):
            ends = np.cumsum([len(q) for q in qs])
            starts = ends - np.array([len(q) for q in qs])
            self.outputs.append([SearchOutput(r.counterfactuals[s:e], r.n_iter[s:e]) for s, e in zip(starts, ends)])

    def lookup(self, model, X: np.ndarray) -> SearchOutput | None:
        """The stacked search's output for ``model`` on exactly the rows ``X``, or None (not planned)."""
        k = self.index.get(id(model))
        if k is None or self.failed:
            return None
        match = [p for p, q in enumerate(self.queries[k]) if q.shape == X.shape and np.array_equal(q, X)]
        if not match:
            return None
        with self._lock:
            if self.outputs is None and not self.failed:
                self._run()
        if self.failed:
            return None
        return self.outputs[k][match[0]]
