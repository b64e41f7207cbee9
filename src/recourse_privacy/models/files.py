"""Load a user's saved model: skops (safe, the format to recommend) or joblib/pickle (trusted files only).

- ``.skops``: read with ``skops.io``, which rebuilds only types it knows to be safe. Any other
  type in the file (a custom transformer, a third-party estimator) is refused with the list of
  those types; pass each one you trust in ``trusted`` (``--trust TYPE`` on the command line).
- ``.joblib`` / ``.pkl`` / ``.pickle``: unpickling runs arbitrary code from the file, so it needs
  ``trust_pickle=True`` (``--trust-pickle``): only for files you made yourself or fully trust.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from recourse_privacy.errors import InvalidInputError, MissingFileError

__all__ = ["MODEL_SUFFIXES", "load_model_file"]

_SKOPS = (".skops",)
_PICKLE = (".joblib", ".pkl", ".pickle")
MODEL_SUFFIXES = _SKOPS + _PICKLE


def load_model_file(path: str | Path, trusted: Sequence[str] = (), *, trust_pickle: bool = False) -> object:
    """The model saved in ``path``; raise, naming the file and the fix, on an unknown format or untrusted types."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise MissingFileError(f"no such model file: {path}")
    suffix = path.suffix.lower()
    if suffix in _SKOPS:
        import skops.io as sio

        try:
            untrusted = sio.get_untrusted_types(file=path)
        except Exception as err:  # noqa: BLE001 - a corrupt or foreign zip
            raise InvalidInputError(f"cannot read {path.name} as a skops file: {err}") from None
        refused = [t for t in untrusted if t not in set(trusted)]
        if refused:
            raise InvalidInputError(
                f"{path.name} holds types skops does not trust by default: {', '.join(refused)}; "
                f"if you trust this file, pass --trust {','.join(refused)} (Python: trusted=[...])"
            )
        return sio.load(path, trusted=list(untrusted))
    if suffix in _PICKLE:
        if not trust_pickle:
            raise InvalidInputError(
                f"{path.name} is a pickle (joblib) file: loading it runs any code it holds; pass --trust-pickle "
                "(Python: trust_pickle=True) only for a file you trust, or save the model with skops.io.dump "
                "as a .skops file"
            )
        import joblib

        try:
            return joblib.load(path)
        except Exception as err:  # noqa: BLE001 - unpickling raises anything
            raise InvalidInputError(f"cannot load {path.name} with joblib: {type(err).__name__}: {err}") from None
    raise InvalidInputError(
        f"cannot tell the format of model file {path.name}: use {', '.join(MODEL_SUFFIXES)} "
        "(skops.io.dump is the safe one)"
    )
