"""Networks are initialised from generators of their own, never torch's global one (models/torch_utils.py:
``seeded_linear``): the same numbers whatever other Python threads draw or seed at the same time.

An audit fits its reference worlds' VAEs (C-CHVAE, REVISE) side by side in Python threads. With
``torch.manual_seed`` under ``fork_rng`` two worlds could re-seed the global generator under each other, and the
C-CHVAE cell's CFD-LRT AUC moved between runs with the threads' timing (0.5294 to 0.5322, stop 35).
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from recourse_privacy.models import make_model
from recourse_privacy.models.torch_utils import seeded_linear
from recourse_privacy.recourse.vae import VAE


def _vae_weights(seed: int) -> list[np.ndarray]:
    v = VAE(hidden_layers=(16, 8), random_state=0)
    v.mutable_ = np.array([True] * 5 + [False] * 2)
    v._build(seed)
    return [p.detach().numpy().copy() for m in (v.encoder_, v.mu_, v.logvar_, v.decoder_) for p in m.parameters()]


def test_seeded_linear_draws_the_global_generators_numbers_without_touching_it():
    """Layers from a generator seeded with s hold what ``nn.Linear`` draws after ``torch.manual_seed(s)``, and the
    global generator's state is the same before and after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        expected = [torch.nn.Linear(7, 5, dtype=torch.float64), torch.nn.Linear(5, 3, dtype=torch.float64)]
    state = torch.get_rng_state()
    gen = torch.Generator().manual_seed(11)
    got = [seeded_linear(7, 5, gen, torch.float64), seeded_linear(5, 3, gen, torch.float64)]
    assert torch.equal(torch.get_rng_state(), state)
    for a, b in zip(got, expected):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)


def test_networks_built_while_another_thread_reseeds_the_global_generator_are_the_same():
    """VAEs and MLPs built in four threads while a fifth re-seeds torch's global generator in a loop: every
    network equals the one built alone with its seed."""
    seeds = list(range(40))
    alone = {s: _vae_weights(s) for s in seeds}
    mlp = make_model("mlp", hidden_layers=(32,), random_state=0)
    mlp_alone = {s: [p.detach().clone() for p in mlp._build(6, s).parameters()] for s in seeds}
    stop = threading.Event()
    got, got_mlp = {}, {}

    def reseed():
        rng = np.random.default_rng(0)
        while not stop.is_set():
            torch.manual_seed(int(rng.integers(1 << 30)))

    def build(part):
        for s in part:
            got[s] = _vae_weights(s)
            got_mlp[s] = [p.detach().clone() for p in mlp._build(6, s).parameters()]

    noise = threading.Thread(target=reseed)
    noise.start()
    try:
        workers = [threading.Thread(target=build, args=(seeds[k::4],)) for k in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        stop.set()
        noise.join()
    for s in seeds:
        assert all(np.array_equal(a, b) for a, b in zip(got[s], alone[s]))
        assert all(torch.equal(a, b) for a, b in zip(got_mlp[s], mlp_alone[s]))


def _torch_model(seed: int):
    """A ``TorchModel`` whose factory and training draw from torch's global generator (initialisation, shuffles,
    dropout), as users' do."""
    from recourse_privacy.models.wrappers import TorchModel

    def factory(d: int):
        return torch.nn.Sequential(
            torch.nn.Linear(d, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1)
        )

    def train(module, X, y):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
        for _ in range(30):
            for idx in torch.randperm(len(Xt)).split(16):
                opt.zero_grad()
                torch.nn.functional.binary_cross_entropy_with_logits(module(Xt[idx])[:, 0], yt[idx]).backward()
                opt.step()

    return TorchModel(module_factory=factory, train_fn=train, random_state=seed)


def _fitted_weights(seed: int, X, y) -> list[torch.Tensor]:
    return [p.detach().clone() for p in _torch_model(seed).fit(X, y).module_.parameters()]


def test_torch_models_fitted_in_concurrent_threads_equal_their_fits_alone():
    """A user's ``TorchModel`` draws from torch's global generator; four fitted at once in threads (global_rng's lock
    makes them take turns) hold the weights each gets alone, and the caller's global generator is put back."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 5))
    y = (X[:, 0] + 0.3 * rng.normal(size=64) > 0).astype(np.int64)
    seeds = list(range(8))
    alone = {s: _fitted_weights(s, X, y) for s in seeds}
    state = torch.get_rng_state()
    got = {}

    def fit(part):
        for s in part:
            got[s] = _fitted_weights(s, X, y)

    threads = [threading.Thread(target=fit, args=(seeds[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.equal(torch.get_rng_state(), state)
    for s in seeds:
        assert all(torch.equal(a, b) for a, b in zip(got[s], alone[s])), s
    assert not all(torch.equal(a, b) for a, b in zip(alone[0], alone[1]))  # the seeds do matter


def test_numpy_global_seed_blocks_in_threads_each_draw_their_seeds_numbers():
    """Blocks that seed numpy's global generator (Anonymeter, mbi) draw, in concurrent threads, what they draw alone;
    the caller's state is put back."""
    import time

    from recourse_privacy.global_rng import numpy_global_seed

    def draws(seed):
        out = []
        with numpy_global_seed(seed):
            for _ in range(20):
                out.append(np.random.random())
                time.sleep(0.0005)  # let the other threads run mid-block
        return out

    alone = {s: draws(s) for s in range(8)}
    np.random.seed(5)
    state = np.random.get_state()
    got = {}

    def run(part):
        for s in part:
            got[s] = draws(s)

    threads = [threading.Thread(target=run, args=(list(range(k, 8, 4)),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone
    assert np.array_equal(np.random.get_state()[1], state[1]) and np.random.get_state()[2] == state[2]
