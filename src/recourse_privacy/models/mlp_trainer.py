"""The MLP trainer: many networks of one architecture at once (stacked weights, batched matrix products, one Adam step).

:class:`~recourse_privacy.models.mlp.MLPModel` trains through it with a stack of one; reference models through
:func:`~recourse_privacy.models.batched.fit_mlps_batched`, many at a time.

Shadow models differ only in their training rows and seeds, so they can be trained together.
The K networks' weights are stacked, layer by layer, into (K, n_in, n_out) tensors that live
in one flat parameter vector; a training step is a handful of ``torch.baddbmm`` / ``torch.bmm``
products over the stack (forward, then a hand-written backward of the mean binary
cross-entropy through the ReLU layers), and one fused Adam step over the whole vector. Every
intermediate lives in a buffer allocated once, so the loop allocates nothing.

Each network gets :meth:`MLPModel.fit`'s initialisation (the same seeded ``_build``) and its
minibatch order (the same seeded ``torch.randperm`` per epoch); the loss is the sum of the K
models' mean batch losses and Adam is elementwise, so each network follows the trajectory it
follows alone, up to floating-point summation order.

Why not ``torch.func.vmap`` (the previous implementation): profiled (``torch.profiler``) on 16
networks of width 1,000 (heloc, batch 64), its step spent most of its time outside the two
matrix products that carry the FLOPs: batched matrix-vector products of the width-1 output
layer laid out as (K, B, h) x (K, h, 1), which run about 40x slower than the same product laid
out as (K, 1, h) x (K, h, B); fresh (K, B, h) temporaries every step (page faults: the ReLU
backward took longer than a matrix product); autograd bookkeeping; Adam's per-tensor loop. Here
the two first-layer products are more than half of a step on the CPU. See
``benchmarks/bench_shadow_batched.py``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence

import numpy as np

from recourse_privacy.validation import derive_seed

__all__ = ["GROUP_MODELS", "STACK_WORKERS", "fit_groups"]

#: how many stacks train at once on the CPU; None (the default): torch's thread count of the moment. An audit
#: that trains its owner's model beside the shadow models holds torch's threads at one for both sides and sets
#: this to the usable cores (audit/pipeline.py), so that the shadow stacks do not train one after another while
#: a core idles once the owner's side is done. A network does not depend on it (tested).
STACK_WORKERS: contextvars.ContextVar[int | None] = contextvars.ContextVar("stack_workers", default=None)


#: at most this many networks per stack on the CPU: a (16, 64, 1,000) float32 activation is 4 MiB, and a step
#: costs about 0.14 ms of CPU per network, against 0.21 ms in a stack of 64 (heloc's 23 features, 1 thread)
GROUP_MODELS = 16


def fit_groups(models: Sequence, X: np.ndarray, y: np.ndarray, rows: list[np.ndarray], dev) -> None:
    """Train each of ``models`` (:class:`~recourse_privacy.models.mlp.MLPModel` instances of one architecture) on
    ``X[rows[k]], y[rows[k]]`` on the torch device ``dev``: :func:`_fit_group` on stacks of networks with equal
    row counts; on the CPU, one stack per core, as many at once as torch's threads.

    On the CPU each stack trains in one torch thread inside a Python thread of its own (torch releases the
    GIL in its products), so the cores work on different stacks with no barrier between them. Torch's own
    threads would split every small product and wait for each other at each one: under load those waits
    cost about 5x the CPU time of the work (measured at load 18: 60.6 against 12.4 ms of CPU per step of
    64 networks). A network's training does not depend on the thread (tested); its float32 rounding may
    depend on its stack's size, which depends on the cores only.
    On a GPU all networks of one row count are one stack.
    """
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    # the stacks are cut by the machine's cores, not torch's thread count of the moment: a network's float32
    # rounding depends on the size of its stack (bmm's kernel), so the same networks whether this runs in two
    # threads or in one beside another stage (audit/pipeline.py trains the owner's model beside the shadow models)
    from recourse_privacy.processes import usable_cpus

    cores = usable_cpus() if dev.type == "cpu" else 1
    sizes = np.array([len(r) for r in rows])
    stacks = []
    for size in np.unique(sizes):
        same = np.flatnonzero(sizes == size)
        step = len(same) if dev.type != "cpu" else min(GROUP_MODELS, -(-len(same) // cores))
        stacks += [same[i : i + step] for i in range(0, len(same), step)]
    # each network's initial weights from its own seeded generator (MLPModel._build), built here on the CPU
    jobs = [
        ([models[k] for k in g], X, y, [rows[k] for k in g], dev, _initial([models[k] for k in g], X.shape[1]))
        for g in stacks
    ]
    if dev.type != "cpu":
        for job in jobs:
            _fit_group(*job)
        return
    from concurrent.futures import ThreadPoolExecutor

    threads = STACK_WORKERS.get() or torch.get_num_threads()  # the stacks train this many at once
    with torch_threads(1), ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
        for done in [pool.submit(_fit_group, *job) for job in jobs]:
            done.result()


def _initial(models: Sequence, d: int) -> list:
    """Each model's network as :meth:`MLPModel.fit` initialises it (its seeded ``_build``), on the CPU."""
    return [m._build(d, derive_seed(m.random_state, 0)) for m in models]


def _fit_group(models: list, X: np.ndarray, y: np.ndarray, rows: list[np.ndarray], dev, modules=None) -> None:
    """Train ``models`` (equal row counts) together on ``dev`` and store each network, on the CPU, in its model.

    ``modules``: the networks as initialised (:func:`_initial`), where the caller built them.
    """
    import torch

    proto, K, d = models[0], len(models), X.shape[1]
    seeds = [derive_seed(m.random_state, 0) for m in models]
    modules = _initial(models, d) if modules is None else modules
    linears = [[layer for layer in mod.modules() if isinstance(layer, torch.nn.Linear)] for mod in modules]
    stack = _Stack(K, (d, *proto.hidden_layers), dev)
    stack.load(linears)
    Xt = torch.as_tensor(np.column_stack([X, np.ones(len(X))]), dtype=torch.float32).to(dev)
    yt = torch.as_tensor(y, dtype=torch.float32).to(dev)
    idx = torch.as_tensor(np.stack(rows), dtype=torch.long)  # (K, m), on the CPU like the generators
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    m, bs = idx.shape[1], proto.batch_size
    X_epoch = torch.empty(K, m, d + 1, dtype=torch.float32, device=dev)  # with the ones column
    y_epoch = torch.empty(K, 1, m, dtype=torch.float32, device=dev)
    # one torch thread per stack on the CPU (see fit_groups); the models are the same for any thread count (tested)
    with torch.no_grad():
        for _ in range(proto.epochs):
            # each model's own minibatch order, drawn as MLPModel.fit draws it; gathered once per epoch
            order = torch.stack([idx[k, torch.randperm(m, generator=g)] for k, g in enumerate(gens)]).to(dev)
            torch.index_select(Xt, 0, order.view(-1), out=X_epoch.view(K * m, d + 1))
            torch.index_select(yt, 0, order.view(-1), out=y_epoch.view(K * m))
            for start in range(0, m, bs):
                stack.step(X_epoch[:, start : start + bs], y_epoch[:, :, start : start + bs])
                stack.adam(proto.lr, proto.weight_decay)
    stack.store(linears)
    for model, module in zip(models, modules):
        module.eval()
        module.requires_grad_(False)
        model.module_ = module
        model.n_features_in_ = d
        model.fitted_ = True


class _Stack:
    """K ReLU networks of widths ``(d, h_1, ..., h_L)`` and one logit, stacked: parameters, gradients, Adam state.

    Hidden layer 0 holds ``W[0]`` (K, d + 1, h_1): ``nn.Linear.weight`` transposed with the bias
    as its last row, applied to inputs with a column of ones appended (so that one product
    gives both the weight and the bias gradient, and the forward copies no bias). Hidden layer
    l > 0 holds ``W[l]`` (K, h_l, h_{l+1}) and ``b[l]`` (K, 1, h_{l+1}); the output layer
    ``w_out`` (K, 1, h_L) and ``b_out`` (K, 1, 1). All are views of one flat vector, and so are
    their gradients, so Adam is one fused elementwise pass.
    """

    def __init__(self, K: int, widths: tuple[int, ...], dev) -> None:
        import torch

        self.K, self.widths, self.dev = K, widths, dev
        shapes = [(K, widths[0] + 1, widths[1])]
        for n_in, n_out in zip(widths[1:-1], widths[2:]):
            shapes += [(K, n_in, n_out), (K, 1, n_out)]
        shapes += [(K, 1, widths[-1]), (K, 1, 1)]
        sizes = [int(np.prod(s)) for s in shapes]
        self.flat = torch.zeros(sum(sizes), dtype=torch.float32, device=dev)
        self.grad = torch.zeros_like(self.flat)
        params = [t.view(s) for t, s in zip(self.flat.split(sizes), shapes)]
        grads = [t.view(s) for t, s in zip(self.grad.split(sizes), shapes)]
        self.W, self.gW = [params[0], *params[1:-2:2]], [grads[0], *grads[1:-2:2]]
        self.b, self.gb = [None, *params[2:-2:2]], [None, *grads[2:-2:2]]
        self.w_out, self.b_out, self.g_w_out, self.g_b_out = *params[-2:], *grads[-2:]
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.steps = torch.zeros((), dtype=torch.float32, device=dev)
        self._buffers: dict[int, tuple] = {}

    def load(self, linears) -> None:
        """Copy each model's ``nn.Linear`` layers into the stack (hidden weights transposed, layer 0's bias as a row)."""
        import torch

        with torch.no_grad():
            for k, lin in enumerate(linears):
                self.W[0][k, :-1].copy_(lin[0].weight.T)
                self.W[0][k, -1].copy_(lin[0].bias)
                for layer in range(1, len(self.W)):
                    self.W[layer][k].copy_(lin[layer].weight.T)
                    self.b[layer][k, 0].copy_(lin[layer].bias)
                self.w_out[k].copy_(lin[-1].weight)
                self.b_out[k, 0].copy_(lin[-1].bias)

    def store(self, linears) -> None:
        """Copy the trained stack back into each model's ``nn.Linear`` layers (on the CPU)."""
        import torch

        W = [w.cpu() for w in self.W]
        b = [None if v is None else v.cpu() for v in self.b]
        w_out, b_out = self.w_out.cpu(), self.b_out.cpu()
        with torch.no_grad():
            for k, lin in enumerate(linears):
                lin[0].weight.copy_(W[0][k, :-1].T)
                lin[0].bias.copy_(W[0][k, -1])
                for layer in range(1, len(W)):
                    lin[layer].weight.copy_(W[layer][k].T)
                    lin[layer].bias.copy_(b[layer][k, 0])
                lin[-1].weight.copy_(w_out[k])
                lin[-1].bias.copy_(b_out[k, 0])

    def _buffers_for(self, B: int) -> tuple:
        """Activations, their gradients, the logits and a scratch input for a batch of ``B`` rows, allocated once."""
        import torch

        if B not in self._buffers:
            kw = dict(dtype=torch.float32, device=self.dev)
            hs = [torch.empty(self.K, B, h, **kw) for h in self.widths[1:]]
            gs = [torch.empty(self.K, B, h, **kw) for h in self.widths[1:-1]]
            n_in = self.widths[0] + 1 if len(hs) == 1 else self.widths[-2]
            self._buffers[B] = (hs, gs, torch.empty(self.K, 1, B, **kw), torch.empty(self.K, B, n_in, **kw))
        return self._buffers[B]

    def step(self, xb, yb) -> None:
        """Gradients of every model's mean binary cross-entropy on its batch.

        ``xb`` (K, B, d + 1) with a last column of ones, ``yb`` (K, 1, B). The gradient at the
        last hidden layer's pre-activations is rank one per model before the ReLU mask M: with
        g the logit gradients (K, 1, B), w the output weights and a the layer's input,
        dL/dW = ((a * g^T)^T M) * w and dL/db = (g M) * w. With one hidden layer (the paper's
        MLP) no (K, B, h) gradient is ever formed: M overwrites the activations in place.
        """
        import torch

        B = xb.shape[1]
        hs, gs, z, scaled = self._buffers_for(B)
        n_hidden = len(hs)
        a = xb
        for layer in range(n_hidden):
            if layer == 0:
                torch.bmm(a, self.W[0], out=hs[0])
            else:
                torch.baddbmm(self.b[layer], a, self.W[layer], out=hs[layer])
            a = hs[layer].relu_()
        # the output layer as (K, 1, h) x (K, h, B): a batched matrix-vector product laid out as a GEMM row
        torch.baddbmm(self.b_out, self.w_out, a.transpose(1, 2), out=z)
        gz = z.sigmoid_().sub_(yb).div_(B)  # d(mean BCE)/d(logit), (K, 1, B)
        torch.bmm(gz, a, out=self.g_w_out)
        torch.sum(gz, dim=2, keepdim=True, out=self.g_b_out)
        mask = a.gt_(0)  # the last ReLU's 0/1 mask, in place: its activations are no longer needed
        last = n_hidden - 1
        inputs = xb if last == 0 else hs[last - 1]
        torch.mul(inputs, gz.transpose(1, 2), out=scaled)
        torch.bmm(scaled.transpose(1, 2), mask, out=self.gW[last]).mul_(self.w_out)
        if not last:
            return
        torch.bmm(gz, mask, out=self.gb[last]).mul_(self.w_out)
        grad = mask.mul_(gz.transpose(1, 2)).mul_(self.w_out)  # dL/d(last pre-activation), in place
        torch.bmm(grad, self.W[last].transpose(1, 2), out=gs[last - 1])
        relu_backward = torch.ops.aten.threshold_backward.grad_input
        for layer in reversed(range(last)):
            relu_backward(gs[layer], hs[layer], 0.0, grad_input=gs[layer])  # dL/d(pre-activation of `layer`)
            torch.bmm((xb if layer == 0 else hs[layer - 1]).transpose(1, 2), gs[layer], out=self.gW[layer])
            if layer:
                torch.sum(gs[layer], dim=1, keepdim=True, out=self.gb[layer])
                torch.bmm(gs[layer], self.W[layer].transpose(1, 2), out=gs[layer - 1])

    def adam(self, lr: float, weight_decay: float) -> None:
        """One Adam step (torch's defaults: betas 0.9, 0.999, eps 1e-8; L2 ``weight_decay``) over every model."""
        from torch.optim.adam import adam

        adam(
            [self.flat],
            [self.grad],
            [self.exp_avg],
            [self.exp_avg_sq],
            [],
            [self.steps],
            fused=True,
            amsgrad=False,
            beta1=0.9,
            beta2=0.999,
            lr=lr,
            weight_decay=weight_decay,
            eps=1e-8,
            maximize=False,
        )
