"""Recourse: the common interface, actionability constraints, exact linear recourse and SCFE."""
from recourse_privacy.recourse.base import (
    NORMS, RecourseMethod, RecourseResult, check_supports, distances, fit_for,
)
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.linear import LinearRecourse
from recourse_privacy.recourse.registry import RECOURSE_METHODS, check_recourse_name, make_recourse, recourse_requires
from recourse_privacy.recourse.scfe import SCFE

__all__ = [
    "ActionSet", "LinearRecourse", "NORMS", "RECOURSE_METHODS", "RecourseMethod", "RecourseResult", "SCFE",
    "check_recourse_name", "check_supports", "distances", "fit_for", "make_recourse", "recourse_requires",
]
