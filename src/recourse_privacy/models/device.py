"""Where torch computations run: ``cpu``, ``cuda`` or ``auto`` (CUDA where available, else the CPU).

A device is chosen per call (``MLPModel(device=...)``, ``fit_mlps_batched(..., device=...)``) or
for a block of work with :func:`use_device` (the audit enters ``AuditConfig.device``); a call
without one uses the innermost :func:`use_device` block, and ``auto`` outside any block.
``auto`` never overrides an enclosing choice: ``use_device("auto")`` keeps it.

Fitted models keep their parameters on the CPU whatever device trained them (they pickle and
load anywhere, and numpy sees them directly); training and gradient recourse move what they need
onto the device and bring the results back. Importing this module does not import torch.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from recourse_privacy.errors import IncompatibleError, InvalidInputError

if TYPE_CHECKING:
    import torch

#: the device names an option or a parameter accepts
DEVICES = ("auto", "cpu", "cuda")

_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("recourse_privacy_device", default="auto")


def check_device(device, name: str = "device") -> str:
    """Return ``device`` if it is one of :data:`DEVICES`, else raise naming the parameter (torch not imported)."""
    if not isinstance(device, str) or device not in DEVICES:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(repr, DEVICES))}; got {device!r}")
    return device


def current_device() -> str:
    """The device name of the innermost :func:`use_device` block (``auto`` outside any)."""
    return _CURRENT.get()


@contextmanager
def use_device(device: str | None) -> Iterator[str]:
    """Run a block with ``device`` as the default of every torch computation in it.

    ``None`` and ``"auto"`` keep the enclosing choice. Yields the name in force inside the block.
    """
    device = "auto" if device is None else check_device(device)
    if device == "auto":
        yield _CURRENT.get()
        return
    token = _CURRENT.set(device)
    try:
        yield device
    finally:
        _CURRENT.reset(token)


def resolve_device(device: str | None = None, name: str = "device") -> torch.device:
    """The ``torch.device`` for ``device`` (None: :func:`current_device`); ``auto`` is CUDA where available.

    ``cuda`` on a machine without a usable CUDA device raises an IncompatibleError naming ``name``.
    """
    import torch

    device = current_device() if device is None else check_device(device, name)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise IncompatibleError(
            f"{name} 'cuda' was asked for, but torch sees no CUDA device "
            f"(torch {torch.__version__}); use {name} 'cpu' or 'auto'"
        )
    return torch.device(device)


def device_kind(device: str | None = None) -> str:
    """``"cpu"`` or ``"cuda"``: what ``device`` resolves to here (imports torch only for ``auto`` and ``cuda``)."""
    device = current_device() if device is None else check_device(device)
    return "cpu" if device == "cpu" else resolve_device(device).type


def describe_device(device: str | None = None) -> str:
    """One line naming where ``device`` runs (for benchmarks): the GPU's name, or the CPU and torch's threads."""
    import os
    import platform

    import torch

    dev = resolve_device(device)
    if dev.type == "cuda":
        return f"{dev} ({torch.cuda.get_device_name(dev)}, torch {torch.__version__})"
    cpu = platform.processor() or platform.machine()
    return f"cpu ({cpu}, {os.cpu_count()} cores, torch {torch.__version__})"
