"""Datasets, preprocessing and the member / non-member / adversary pools of an audit.

- :func:`load_dataset` loads one of :data:`DATASETS` (real data from a data directory or a
  checked download; synthetic and scikit-learn data generated in memory);
- :func:`register_dataset` adds a dataset to that registry (a third party's loader);
- :func:`load_tabular` loads and validates a user's own CSV / Parquet table;
- :class:`Preprocessor` one-hot encodes, scales and de-correlates, fitted on the owner's
  training data only;
- :func:`split_pools` draws the disjoint pools of a membership-inference audit.
"""

from __future__ import annotations

from recourse_privacy.data.dataset import ChecksumError, Dataset
from recourse_privacy.data.files import (
    ENV_VAR,
    dataset_file,
    default_cache_dir,
    fetch_file,
    resolve_data_dir,
    source_url,
    verify_file,
)
from recourse_privacy.data.loading import load_dataset
from recourse_privacy.data.pools import Pools, as_generator, split_pools
from recourse_privacy.data.preprocessing import OneHotGroup, Preprocessor
from recourse_privacy.data.registry import (
    DATASET_DESCRIPTIONS,
    DATASET_SOURCES,
    DATASETS,
    REAL_DATASETS,
    public_domain,
    register_dataset,
)
from recourse_privacy.data.synthetic import make_synthetic, synthetic_centers
from recourse_privacy.data.tabular import load_tabular, validate_frame

__all__ = [
    "DATASETS",
    "DATASET_DESCRIPTIONS",
    "DATASET_SOURCES",
    "REAL_DATASETS",
    "ENV_VAR",
    "ChecksumError",
    "Dataset",
    "Pools",
    "OneHotGroup",
    "Preprocessor",
    "as_generator",
    "dataset_file",
    "default_cache_dir",
    "fetch_file",
    "load_dataset",
    "load_tabular",
    "make_synthetic",
    "public_domain",
    "register_dataset",
    "resolve_data_dir",
    "source_url",
    "split_pools",
    "synthetic_centers",
    "validate_frame",
    "verify_file",
]
