"""The registry of named datasets: built-in ones and any a third-party package adds.

An entry's object is a loader function returning a :class:`~recourse_privacy.data.dataset.Dataset`;
its metadata says where the data comes from and which options the loader accepts, so that
:func:`~recourse_privacy.data.load_dataset` dispatches and checks options by reading the
entry. Adding a dataset is one decorator::

    from recourse_privacy.data import register_dataset

    @register_dataset("mydata", description="...", source="generated", options=("scale",))
    def load_mydata(scale: float = 1.0) -> Dataset: ...

How :func:`load_dataset` calls a loader:

- ``source="file"`` (with ``file="name.csv"``): ``loader(path, **options)``, where ``path`` is the
  file found in the data directory / user cache; a public file declares ``url=`` and ``sha256=``
  (and ``member=`` inside a zip) and is downloaded there, checked (:mod:`~recourse_privacy.data.files`);
- ``source="generated"`` or ``"scikit-learn"``: ``loader(**options)``.

``options`` names the keyword arguments a loader accepts; any other option is refused. The
standard names ``n_samples``, ``n_features`` and ``random_state`` among them mean that the loader
sizes (and seeds) the data itself; otherwise ``n_samples`` draws that many rows of the loaded
data at random, seeded by ``random_state``, and ``n_features`` is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.data.domain import Domain
from recourse_privacy.errors import InvalidInputError, UnknownNameError
from recourse_privacy.registry import Entry, Registry

__all__ = [
    "DATASETS",
    "DATASET_DESCRIPTIONS",
    "DATASET_SOURCES",
    "REAL_DATASETS",
    "SIZING_OPTIONS",
    "DatasetLoader",
    "lookup",
    "public_domain",
    "register_dataset",
]

#: where a dataset's data comes from
DATASET_SOURCES = ("file", "generated", "scikit-learn")
#: options that, when a loader declares them, it receives instead of load_dataset handling them
SIZING_OPTIONS = ("n_samples", "n_features", "random_state")

DatasetLoader = Callable[..., Dataset]
L = TypeVar("L", bound=DatasetLoader)

DATASETS: Registry[DatasetLoader] = Registry(
    "dataset", builtins=("recourse_privacy.data.datasets", "recourse_privacy.data.purchase_texas")
)


def register_dataset(
    name: str,
    *,
    description: str,
    source: str,
    file: str | None = None,
    url: str | None = None,
    sha256: str | None = None,
    member: str | None = None,
    label: str | None = None,
    options: Iterable[str] = (),
    domain: Domain | str | None = None,
    replace: bool = False,
) -> Callable[[L], L]:
    """Decorator registering a loader function as dataset ``name`` (see the module docstring).

    ``source`` is one of :data:`DATASET_SOURCES`; ``file`` (the file name looked up in the data
    directory) is required for ``"file"`` and refused otherwise. A public file declares where it
    is downloaded from (``url``; ``member``: the file inside a zip archive there) and its
    ``sha256``, checked on download and whenever the file is read; a local-only file may declare
    its ``sha256`` alone. ``label`` says what label 1 means (shown after the description);
    ``options`` lists the keyword arguments the loader accepts; ``domain`` the public domain
    metadata (a :class:`~recourse_privacy.data.domain.Domain`, or a one-line summary where the
    features depend on the options), shown by ``recourse-privacy list`` and ``datasets``. A bad
    declaration raises :class:`InvalidInputError`.
    """
    if source not in DATASET_SOURCES:
        raise InvalidInputError(f"dataset {name!r}: source must be one of {', '.join(DATASET_SOURCES)}; got {source!r}")
    if source == "file":
        if not isinstance(file, str) or not file:
            raise InvalidInputError(f"dataset {name!r}: source='file' needs file='<file name>'")
    else:
        for key, value in (("file", file), ("url", url), ("sha256", sha256), ("member", member)):
            if value is not None:
                raise InvalidInputError(f"dataset {name!r}: {key}={value!r} applies only to source='file'")
    if url is not None and sha256 is None:
        raise InvalidInputError(f"dataset {name!r}: url= needs sha256= (a download is always checked)")
    if member is not None and url is None:
        raise InvalidInputError(f"dataset {name!r}: member= names a file inside the archive at url=; give url=")
    if sha256 is not None and not (
        isinstance(sha256, str) and len(sha256) == 64 and all(c in "0123456789abcdef" for c in sha256)
    ):
        raise InvalidInputError(f"dataset {name!r}: sha256 must be 64 lower-case hex digits; got {sha256!r}")
    if isinstance(options, str):
        raise InvalidInputError(f"dataset {name!r}: options must be a list of names, not the string {options!r}")
    options = tuple(options)
    bad = [o for o in options if not (isinstance(o, str) and o.isidentifier())]
    if bad or len(set(options)) != len(options):
        raise InvalidInputError(f"dataset {name!r}: options must be distinct keyword names; got {options!r}")
    extra: dict[str, Any] = {}
    if isinstance(domain, Domain):
        extra = {"domain": domain.summary(), "public_domain": domain}
    elif domain is not None:
        extra = {"domain": str(domain)}
    shown = description if label is None else f"{description}; 1 = {label}"
    return DATASETS.register(
        name,
        description=shown,
        replace=replace,
        source=source,
        file=file,
        url=url,
        sha256=sha256,
        member=member,
        label=label,
        options=options,
        **extra,
    )


def lookup(name: str) -> Entry[DatasetLoader]:
    """The registry entry of dataset ``name`` (as given, else lower case with ``-`` as ``_``)."""
    if not isinstance(name, str):
        raise InvalidInputError(f"dataset name must be a string, got {type(name).__name__}")
    for key in dict.fromkeys((name, name.strip().lower().replace("-", "_"))):
        if key in DATASETS:
            return DATASETS.get(key)
    raise UnknownNameError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")


def public_domain(name: str) -> Domain | None:
    """The public domain metadata dataset ``name`` declares (None: none, or it depends on the options)."""
    return lookup(name).meta.get("public_domain")


class _Descriptions(Mapping[str, str]):
    """Live read-only view: dataset name -> description, in registration order."""

    def __getitem__(self, name: str) -> str:
        if name not in DATASETS:
            raise KeyError(name)
        return DATASETS.get(name).description

    def __iter__(self) -> Iterator[str]:
        return iter(DATASETS.names())

    def __len__(self) -> int:
        return len(DATASETS)

    def __repr__(self) -> str:
        return repr(dict(self))


class _NamesBySource(Sequence[str]):
    """Live read-only view: the names of the datasets with one source, in registration order."""

    def __init__(self, source: str):
        self._source = source

    def _names(self) -> tuple[str, ...]:
        return tuple(e.name for e in DATASETS.entries() if e.meta.get("source") == self._source)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_NamesBySource, tuple, list)):
            return self._names() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._names())


#: description of every registered dataset (a live view of :data:`DATASETS`)
DATASET_DESCRIPTIONS: Mapping[str, str] = _Descriptions()
#: the datasets read from a file (a live view of :data:`DATASETS`)
REAL_DATASETS: Sequence[str] = _NamesBySource("file")
