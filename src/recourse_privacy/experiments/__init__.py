"""The experiment engine on top of the audit: YAML grids (spec), the resumable results store, local and
Ray engines and the results tables. The shipped reproductions live in :mod:`recourse_privacy.reproductions`,
the ``recourse`` and ``tradeoff`` evaluations in :mod:`recourse_privacy.evaluation`."""
