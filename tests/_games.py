"""A small recourse game for the attack tests: logistic owner, linear recourse, online and offline reference sets."""

from __future__ import annotations

import recourse_privacy.audit.stages as stages
from recourse_privacy.models.registry import model_factory
from recourse_privacy.recourse.registry import make_recourse


def linear_game(cfg, *, shared: bool = False):
    """``(data, targets, method, offline, online)`` for the validated ``cfg``: the owner trained, online reference
    models (half of them trained on each target) and the offline shadow set (with ``shared``, the online models
    serving as it, as LiRA's do)."""
    data = stages.prepare_game(cfg, stages.load_data(cfg))
    make = model_factory("logistic")
    targets = stages.train_owner(make, data, cfg.seed)
    method = make_recourse("linear")
    quiet = lambda *a: None  # noqa: E731
    online = stages.train_online_models(cfg, make, method, data, targets, cache_dir=None, progress=quiet)
    offline = stages.train_shadow_models(
        cfg, make, method, data, targets, cache_dir=None, progress=quiet, **({"online": online} if shared else {})
    )
    return data, targets, method, offline, online
