"""Seeded blocks on the process-wide generators (numpy's and torch's) that third-party code draws from.

Our own code draws from generators of its own (``numpy.random.Generator``, ``torch.Generator``). Some code we
call cannot be given one: Anonymeter draws its targets with ``numpy.random``, ``mbi`` samples its synthetic rows
with it, and a user's ``TorchModel`` factory and training function initialise and shuffle with torch's global
generator. Each such block seeds the global generator first; two threads doing so at once would re-seed it under
each other, and the numbers would move with the threads' timing. The blocks here hold one process-wide lock from
the seed to the last draw, and put the generator's state back after.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: held from a global generator's seed to its last draw, by every block below (re-entrant: a block may nest another)
GLOBAL_RNG_LOCK = threading.RLock()


@contextmanager
def numpy_global_seed(seed: int) -> Iterator[None]:
    """Run a block with ``numpy.random`` seeded with ``seed``, no other such block running, then restore its state."""
    with GLOBAL_RNG_LOCK:
        state = np.random.get_state()
        np.random.seed(int(seed) % 2**32)
        try:
            yield
        finally:
            np.random.set_state(state)


@contextmanager
def torch_global_seed(seed: int) -> Iterator[None]:
    """Run a block with torch's global generator seeded with ``seed`` (``torch.manual_seed``, which also seeds CUDA's),
    no other such block running, then restore the CPU generator's state."""
    import torch

    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) % 2**63)
        yield
