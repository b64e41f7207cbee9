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
