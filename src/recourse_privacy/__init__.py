"""recourse-privacy: how much algorithmic recourse leaks about training data.

Heavy dependencies (torch, matplotlib) are imported only by the modules that use
them, so ``import recourse_privacy`` and ``recourse-privacy --help`` stay fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "AuditConfig", "AuditResult", "run_audit"]


def __getattr__(name: str):
    if name in {"AuditConfig", "AuditResult", "run_audit"}:
        from recourse_privacy import audit

        return getattr(audit, name)
    raise AttributeError(f"module 'recourse_privacy' has no attribute {name!r}")
