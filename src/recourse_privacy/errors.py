"""The package's exceptions: one base class, a few kinds, so callers (the CLI) catch one class.

Each subclass also derives from the built-in exception callers expected before it existed
(``ValueError`` for bad input, ``RuntimeError`` for state errors), as scikit-learn's
``NotFittedError`` does.
"""

from __future__ import annotations

__all__ = [
    "AttackUnavailableError",
    "BudgetExceededError",
    "IncompatibleError",
    "InvalidInputError",
    "MissingFileError",
    "NotFittedError",
    "RecoursePrivacyError",
    "UnknownNameError",
]


class RecoursePrivacyError(Exception):
    """Base class of every error this package raises on purpose; its message is meant for the user."""


class InvalidInputError(RecoursePrivacyError, ValueError):
    """A parameter, array, file or column is not what it must be; the message names it."""


class UnknownNameError(InvalidInputError, KeyError):
    """A name (attack, recourse method, model, defense, dataset) is not registered; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class AttackUnavailableError(InvalidInputError):
    """An attack cannot score these targets (e.g. no reference model gave a usable statistic); the message says
    why. The audit runs the other attacks and reports this one as not run, with the reason."""


class MissingFileError(InvalidInputError, FileNotFoundError):
    """A data or model file is not where it was looked for; the message names the file and the places searched."""


class IncompatibleError(InvalidInputError):
    """Two valid choices that cannot run together (exact linear recourse on an MLP, a defense and a method)."""


class NotFittedError(RecoursePrivacyError, RuntimeError):
    """An estimator was used before ``fit``."""


class BudgetExceededError(RecoursePrivacyError, RuntimeError):
    """A query would spend more privacy budget than remains; nothing was released."""
