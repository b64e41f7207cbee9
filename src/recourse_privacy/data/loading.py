"""Load any registered dataset by name: :func:`load_dataset`.

It reads the dataset's registry entry (:mod:`~recourse_privacy.data.registry`): where its data
comes from (a checked file, :mod:`~recourse_privacy.data.files`, or generated), which options
its loader accepts, and whether the loader sizes the data itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.data.files import dataset_file
from recourse_privacy.data.registry import DATASETS, SIZING_OPTIONS, lookup
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import RandomState, as_generator

__all__ = ["load_dataset"]


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise InvalidInputError(f"{name} must be a positive int, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a positive int, got {value!r}") from None


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    n_samples: int | None = None,
    n_features: int | None = None,
    random_state: RandomState = None,
    download: bool = True,
    **options: Any,
) -> Dataset:
    """Load a dataset of :data:`DATASETS` by name (``-`` and upper case are accepted too).

    Real datasets are read from ``data_dir`` / ``$RECOURSE_PRIVACY_DATA`` / the user cache
    (downloaded there when absent and ``download`` is True). ``synthetic`` is generated with
    ``n_samples`` (default 15000) rows and ``n_features`` (default 100) columns, options
    ``class_sep`` and ``flip_y``; ``digits`` takes ``positive=`` or ``digits=(a, b)``. For
    the other datasets ``n_samples`` draws that many rows at random without replacement
    (seeded by ``random_state``), and ``n_features`` is an error. The options a dataset
    accepts are those of its registry entry; any other raises :class:`InvalidInputError`.
    """
    entry = lookup(name)
    key = entry.name
    accepted: tuple[str, ...] = tuple(entry.meta.get("options", ()))
    if n_samples is not None:
        n_samples = _as_int(n_samples, "n_samples")
        if n_samples < 1:
            raise InvalidInputError(f"n_samples must be a positive int, got {n_samples!r}")
    if n_features is not None and "n_features" not in accepted:
        sized = [e.name for e in DATASETS.entries() if "n_features" in e.meta.get("options", ())]
        raise InvalidInputError(
            f"n_features applies only to the datasets that generate their features "
            f"({', '.join(sized) or 'none'}), not {key!r}"
        )
    extra = tuple(o for o in accepted if o not in SIZING_OPTIONS)
    unknown = sorted(set(options) - set(extra))
    if unknown:
        hint = f"; it accepts {', '.join(extra)}" if extra else "; it accepts none"
        raise InvalidInputError(f"unknown option(s) {unknown} for dataset {key!r}{hint}")

    kwargs = dict(options)
    given = {
        "n_samples": n_samples,
        "random_state": random_state,
        "n_features": None if n_features is None else _as_int(n_features, "n_features"),
    }
    kwargs.update({k: v for k, v in given.items() if k in accepted})
    path = dataset_file(key, data_dir, download=download)
    args: tuple[Path, ...] = () if path is None else (path,)
    dataset = entry.obj(*args, **kwargs)
    if not isinstance(dataset, Dataset):
        raise InvalidInputError(
            f"the loader of dataset {key!r} ({entry.module}) returned {type(dataset).__name__}, not a Dataset"
        )

    if n_samples is not None and "n_samples" not in accepted:
        if n_samples > dataset.n_rows:
            raise InvalidInputError(f"n_samples={n_samples} exceeds the {dataset.n_rows} rows of dataset {key!r}")
        if n_samples < dataset.n_rows:
            idx = as_generator(random_state).choice(dataset.n_rows, size=n_samples, replace=False)
            dataset = dataset.subset(idx)
    return dataset
