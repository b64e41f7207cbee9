"""The audit's result type: the record :class:`recourse_privacy.results.AuditRecord` bound to :class:`AuditConfig`.

The fields, views and (de)serialising live below the report in :mod:`recourse_privacy.results.audit`
(the report takes any :class:`~recourse_privacy.results.AuditRecord`); this subclass adds only
what needs the audit's configuration type: reading ``config`` back from ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.results.audit import SCHEMA_VERSION, AuditArrays, AuditRecord

__all__ = ["SCHEMA_VERSION", "AuditArrays", "AuditResult"]


@dataclass(frozen=True)
class AuditResult(AuditRecord):
    """Everything one audit produced (see :class:`recourse_privacy.results.AuditRecord`), its config an :class:`AuditConfig`."""

    config: AuditConfig

    @classmethod
    def read_config(cls, d: Mapping) -> AuditConfig:
        """The ``config`` block of metrics.json as an :class:`AuditConfig` (unknown keys raise naming them)."""
        return AuditConfig.from_dict(dict(d))
