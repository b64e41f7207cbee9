"""Actionability constraints, one object per dataset (after actionable-recourse's ActionSet).

Two kinds of constraint live in one :class:`ActionSet`:

- actionability (Ustun et al. 2019): immutable features, features that may only increase,
  value ranges;
- structure, what makes a row a person at all: a one-hot group (:class:`OneHotGroup`) holds
  exactly one "on" indicator (or none, where the all-off state is a dropped level), an
  integer feature is an integer in its original units, and a missing value stays missing
  (:class:`MissingFlag`: its indicator and its value feature as the factual has them).

:meth:`ActionSet.project` maps any proposal onto the set of rows that satisfy both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from recourse_privacy.data.preprocessing import MissingFlag, OneHotGroup
from recourse_privacy.errors import InvalidInputError

__all__ = ["ActionSet", "MissingFlag", "OneHotGroup"]


@dataclass(frozen=True)
class ActionSet:
    """Per encoded feature: may it change, may it only increase, its value range; and the row's structure.

    ``immutable`` and ``increasing`` are boolean masks; ``lower``/``upper`` are bounds
    (use -inf/inf for none). ``groups``: the one-hot groups (:class:`OneHotGroup`);
    ``integer``: boolean mask of the integer-valued features, with ``scale`` / ``offset`` the
    affine map to their original units (``original = encoded * scale + offset``; None: the
    encoded value itself). Monotonicity does not apply inside a one-hot group (a level is
    switched, not increased). ``flags``: the columns that may be missing (:class:`MissingFlag`);
    their indicators are immutable in every set built from a preprocessor, and a row whose
    factual is missing keeps the factual's value feature. :meth:`project` maps any proposal
    onto the feasible set.
    """

    immutable: np.ndarray
    increasing: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    groups: tuple[OneHotGroup, ...] = ()
    integer: np.ndarray | None = None
    scale: np.ndarray | None = None
    offset: np.ndarray | None = None
    flags: tuple[MissingFlag, ...] = ()

    @classmethod
    def unconstrained(cls, n_features: int) -> ActionSet:
        """No constraint at all (the paper's A^p = R^d)."""
        z = np.zeros(n_features, dtype=bool)
        return cls(z, z.copy(), np.full(n_features, -np.inf), np.full(n_features, np.inf))

    @classmethod
    def from_preprocessor(cls, pre, *, actionable: bool = True, bounds: bool = True) -> ActionSet:
        """Masks, ranges and structure learned by a fitted :class:`~recourse_privacy.data.Preprocessor`.

        ``actionable=False``: only the structure (one-hot groups, integer features, missing values
        held), no immutability, monotonicity or ranges. ``bounds=False``: no ranges. With normalised rows
        (``normalize_rows=True``) a row's encoded values depend on its norm, so no structure is
        recorded (the masks and ranges only, as before).
        """
        n = int(pre.n_features_out_)
        use_bounds = bounds and actionable
        lo = np.asarray(pre.lower_, dtype=np.float64) if use_bounds else np.full(n, -np.inf)
        hi = np.asarray(pre.upper_, dtype=np.float64) if use_bounds else np.full(n, np.inf)
        if actionable:
            imm, inc = np.array(pre.immutable_mask_, bool), np.asarray(pre.increasing_mask_, bool)
        else:
            imm, inc = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        flags = tuple(getattr(pre, "missing_flags_", ()))
        imm[[f.flag for f in flags]] = True  # whether a value is missing is the record's, not an action
        if getattr(pre, "normalize_rows", False):
            return cls(imm, inc, lo, hi)
        return cls(
            imm,
            inc,
            lo,
            hi,
            groups=tuple(g for g in pre.groups_ if g.size),
            integer=np.asarray(pre.integer_mask_, bool),
            scale=np.asarray(pre.unit_scale_, np.float64),
            offset=np.asarray(pre.unit_offset_, np.float64),
            flags=flags,
        )

    def with_ranges(self, lower: np.ndarray, upper: np.ndarray) -> ActionSet:
        """The same set with the finite entries of ``lower`` / ``upper`` as its ranges.

        Used to put a dataset's documented public bounds (in encoded units,
        :func:`~recourse_privacy.data.domain.encoded_bounds`) in place of the ranges of the fit data.
        """
        lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        return replace(
            self,
            lower=np.where(np.isfinite(lower), lower, self.lower),
            upper=np.where(np.isfinite(upper), upper, self.upper),
        )

    @property
    def n_features(self) -> int:
        return int(self.immutable.shape[0])

    @property
    def mutable(self) -> np.ndarray:
        return ~self.immutable

    @property
    def structured(self) -> bool:
        """Whether the set has one-hot groups, integer features or missing values (else project is the actionability
        rules only)."""
        return bool(self.groups) or bool(self.flags) or (self.integer is not None and bool(self.integer.any()))

    @property
    def actionability(self) -> ActionSet:
        """The same immutability, monotonicity and ranges without the structure (for continuous iterates)."""
        return ActionSet(self.immutable, self.increasing, self.lower, self.upper)

    @property
    def in_group(self) -> np.ndarray:
        """Boolean mask of the features that belong to a one-hot group."""
        mask = np.zeros(self.n_features, dtype=bool)
        for g in self.groups:
            mask[g.index] = True
        return mask

    @property
    def holds_gaps(self) -> bool:
        """Whether some column may be missing (a numeric :class:`MissingFlag` or a categorical gap's level)."""
        return bool(self.flags) or any(g.missing is not None for g in self.groups)

    def held(self, X: np.ndarray) -> np.ndarray:
        """(n, d) mask of the value features the rows of ``X`` miss (their :class:`MissingFlag` on): immutable for
        those rows (what :meth:`project` sets back; a continuous search masks them per row)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        out = np.zeros(X.shape, dtype=bool)
        for f in self.flags:
            if f.value is not None:
                out[:, f.value] = f.is_on(X)
        return out

    def stuck(self, X: np.ndarray) -> np.ndarray:
        """Rows of ``X`` (n, d) that no proposal can move: every mutable feature is the value of a column they lack."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        free = self.mutable & ~self.held(X)
        for g in self.groups:
            if g.missing is not None:
                free[:, g.index] &= ~g.at_missing(X)[:, None]
        return ~free.any(axis=1)

    def check(self, n_features: int) -> None:
        """Raise where the action set does not match the model's feature count."""
        if self.n_features != n_features:
            raise InvalidInputError(f"action set covers {self.n_features} features; the data has {n_features}")

    # ------------------------------------------------------------------ projection
    def project(self, X_cf: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Feasible version of ``X_cf`` for factuals ``X`` (numpy; broadcast, any leading shape).

        In order: each one-hot group to its nearest valid level (l2 in encoded units, the
        all-off state included where valid); immutable features back to the factual (an
        immutable group keeps the factual's level); increasing features (outside groups) at
        least the factual; the range, widened to hold the factual; integer features rounded
        to the nearest integer in original units that keeps the range (and, for an
        increasing feature, stays at or above the factual); a value the factual lacks (its
        :class:`MissingFlag` on) back to the factual's. A feasible row maps to itself and
        projecting twice equals projecting once.
        """
        X_cf = np.asarray(X_cf, dtype=np.float64)
        X = np.asarray(X, dtype=np.float64)
        if not self.structured:  # exactly the rules (and numbers) before the structure existed
            out = np.where(self.immutable, X, X_cf)
            out = np.where(self.increasing, np.maximum(out, X), out)
            return np.clip(out, np.minimum(self.lower, X), np.maximum(self.upper, X))
        # one copy of the candidates, worked on in place; the factuals, ranges and rules keep their own (smaller)
        # shape and broadcast (a block of Growing Spheres candidates is (rows, samples, d) against (rows, 1, d))
        out = np.empty(np.broadcast_shapes(X_cf.shape, X.shape))
        np.copyto(out, X_cf)
        for g in self.groups:
            out[..., g.index] = self._nearest_level(g, out[..., g.index])
            if g.missing is not None:  # a categorical gap stays a gap (the level excluded above for the others)
                held = g.at_missing(X)
                if held.any():
                    out[..., g.index] = np.where(held[..., None], X[..., g.index], out[..., g.index])
        if self.immutable.any():
            out[..., self.immutable] = X[..., self.immutable]
        increasing = self.increasing & ~self.in_group
        if increasing.any():
            out[..., increasing] = np.maximum(out[..., increasing], X[..., increasing])
        lo, hi = np.minimum(self.lower, X), np.maximum(self.upper, X)
        np.clip(out, lo, hi, out=out)
        if self.integer is not None and self.integer.any():
            self._round_integers(out, X, lo, hi, increasing)
        for f in self.flags:
            if f.value is not None:
                held = f.is_on(X)
                out[..., f.value] = np.where(held, X[..., f.value], out[..., f.value])
        return out

    @staticmethod
    def _nearest_level(g: OneHotGroup, V: np.ndarray) -> np.ndarray:
        """Rows (any leading shape) of one group's block set to their l2-nearest valid level (exactly ``on`` / ``off``)."""
        # squared distance to level j minus that to all-off: only feature j differs
        delta = (V - g.on) ** 2 - (V - g.off) ** 2
        if g.missing is not None and g.missing < g.size:  # a gap is no level a row moves to
            delta[..., g.missing] = np.inf
        pick = np.argmin(delta, axis=-1)[..., None]
        choose = np.arange(g.size) == pick
        if g.allow_none and g.missing != g.size:  # all-off is a valid level, unless it is the gap
            choose &= np.take_along_axis(delta, pick, axis=-1) < 0
        return np.where(choose, g.on, g.off)

    def units(self) -> tuple[np.ndarray, np.ndarray]:
        """(scale, offset) of the map to original units, ``original = encoded * scale + offset``."""
        n = self.n_features
        scale = np.ones(n) if self.scale is None else self.scale
        offset = np.zeros(n) if self.offset is None else self.offset
        return scale, offset

    def _round_integers(
        self, out: np.ndarray, X: np.ndarray, lo: np.ndarray, hi: np.ndarray, increasing: np.ndarray
    ) -> None:
        """Integer features of ``out`` (in place; the others broadcast against it) to the nearest integer (original
        units) inside ``[lo, hi]`` (and >= X if increasing)."""
        j = np.flatnonzero(self.integer & ~self.immutable)
        scale, offset = self.units()
        s, b = scale[j], offset[j]
        now = out[..., j]
        v = now * s + b
        r = np.round(v)
        # an integer already (up to floating error of the map) stays exactly as it is: idempotence
        keep = np.abs(v - r) <= 1e-9 * np.maximum(1.0, np.abs(v))
        lo_j, hi_j = lo[..., j], hi[..., j]
        lo_o, hi_o = np.sort(np.stack([lo_j * s + b, hi_j * s + b]), axis=0)
        x_o = X[..., j] * s + b
        r = np.where(increasing[j] & (r < x_o), np.ceil(x_o - 1e-9), r)
        r = np.where(r < lo_o, np.ceil(lo_o - 1e-9), r)
        r = np.where(r > hi_o, np.floor(hi_o + 1e-9), r)
        # the map's floating error must not step outside the range: clip in encoded units (ulps)
        out[..., j] = np.where(keep, now, np.clip((r - b) / s, lo_j, hi_j))

    # ------------------------------------------------------------------ checks
    def structural_violations(self, X_cf: np.ndarray, tol: float = 1e-8) -> np.ndarray:
        """Per row: one-hot groups that are not a single valid level, plus integer features that are not integers.

        ``tol`` is in encoded units (for integers: the distance to the nearest integer's encoding).
        """
        X_cf = np.atleast_2d(np.asarray(X_cf, dtype=np.float64))
        count = np.zeros(len(X_cf), dtype=np.int64)
        for g in self.groups:
            V = X_cf[:, g.index]
            is_on, is_off = np.abs(V - g.on) <= tol, np.abs(V - g.off) <= tol
            n_on = is_on.sum(axis=1)
            ok = (is_on | is_off).all(axis=1) & ((n_on == 1) | ((n_on == 0) & g.allow_none))
            count += ~ok
        if self.integer is not None and self.integer.any():
            j = np.flatnonzero(self.integer)
            scale, offset = self.units()
            v = X_cf[:, j] * scale[j] + offset[j]
            count += (np.abs(v - np.round(v)) / np.abs(scale[j]) > tol).sum(axis=1)
        for f in self.flags:
            count += (np.abs(X_cf[:, f.flag] - f.on) > tol) & (np.abs(X_cf[:, f.flag] - f.off) > tol)
        return count

    def violations(self, X_cf: np.ndarray, X: np.ndarray, tol: float = 1e-8) -> np.ndarray:
        """Number of violated constraints per row (actionability per feature, plus :meth:`structural_violations`)."""
        increasing = self.increasing & ~self.in_group
        changed_immutable = (np.abs(X_cf - X) > tol) & self.immutable
        decreased = (X_cf < X - tol) & increasing
        out_of_range = (X_cf < self.lower - tol) | (X_cf > self.upper + tol)
        count = (changed_immutable | decreased | out_of_range).sum(axis=1) + self.structural_violations(X_cf, tol)
        for f in self.flags:  # a missing value given one
            if f.value is not None:
                count += f.is_on(np.atleast_2d(X)) & (np.abs(X_cf[:, f.value] - X[..., f.value]) > tol)
        for g in self.groups:  # a categorical gap filled, or a level made a gap
            if g.missing is not None:
                count += g.at_missing(np.atleast_2d(X)) != g.at_missing(X_cf)
        return count
