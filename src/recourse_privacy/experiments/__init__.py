"""Experiments on top of the audit: YAML grids (spec), the resumable results store, local and Ray engines,
results tables, the privacy-utility trade-off sweep, the recourse quality table and shipped reproductions."""
