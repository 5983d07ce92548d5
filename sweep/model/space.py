"""Parameter spaces: which points a sweep runs, their ids, and their place in the dataset.

* :class:`Grid` - the product of named axes; dataset dims are the axes themselves.
* :class:`Zip`, :class:`Explicit`, :class:`Random`, :class:`LatinHypercube` - a list of
  points along one dim, ``point``, with each parameter as a coordinate on it.
* :class:`Trials` - a search's trials along ``trial``, their parameters chosen as they start.

Every point has an ``index`` (its position in the dataset's sweep dims) and an ``id``, a
hash of its parameters that does not depend on the order of axes or points.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.errors import SweepError
from sweep.wire.protocol import stored_fields

POINT_DIM = "point"
MAX_POINTS = 10_000_000  # random/lhs n and search n_trials: more is a typo, and memory runs out first
INT64 = (-(2**63), 2**63 - 1)
EXACT_INT = 2**53  # past it, a float cannot hold every integer: a mixed axis would change values
# what an axis may not be named: the store's own variables and dims (a clash would overwrite
# them), and names a zarr store or a file system can't hold as a member
RESERVED = frozenset(
    {"point_id", POINT_DIM, "trial", *(n for n in stored_fields())}  # noqa: C416
)


class SpaceError(SweepError, ValueError):
    """A space that can't be built; the message names the key and the fix."""


@dataclass(frozen=True)
class Point:
    index: tuple[int, ...]
    params: dict[str, Any]

    @property
    def id(self) -> str:
        return point_id(self.params)


def point_id(params: Mapping[str, Any]) -> str:
    """A stable 12-hex-digit id for a parameter assignment."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def check_names(where: str, names: Any) -> None:
    """SpaceError unless every parameter name in ``names`` can be a variable of the store: a
    non-empty string, no ``/``, not ``.``-led, not one of the store's own (:data:`RESERVED`)."""
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise SpaceError(f"{where}: {name!r} can't be a parameter's name; use a word, e.g. beta")
        if "/" in name or "\\" in name or name.startswith(".") or "\x00" in name:
            raise SpaceError(
                f"{where}.{name}: a parameter's name can't hold '/' or '\\' or start with '.' (the store "
                "keeps each as a folder); rename it, e.g. to a word"
            )
        if name in RESERVED:
            raise SpaceError(
                f"{where}.{name}: {name!r} is a variable the store keeps for every point; rename the "
                "parameter (e.g. to my_" + name + ")"
            )


def _axis_values(where: str, values: Any, unique: bool = True) -> np.ndarray:
    """Validate one axis' values and return them as a 1-d numpy array (numbers or strings),
    every value exactly as written: NaN, integers past int64 and integers a float can't hold
    beside floats are refused, naming the value."""
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) == 0:
        raise SpaceError(f"{where}: give a non-empty list of values, e.g. [1, 2, 4]")
    kinds = [_kind(v, where) for v in values]
    for v, kind in zip(values, kinds):
        if kind != kinds[0]:
            raise SpaceError(
                f"{where}: value {v!r} is a {kind} among {kinds[0]}s (first: {values[0]!r}); keep one type "
                "per axis (quote numbers meant as text)"
            )
    if kinds[0] == "number":
        _exact_numbers(where, values)
    if unique and len(set(values)) != len(values):
        dup = sorted({str(v) for v in values if list(values).count(v) > 1})
        raise SpaceError(f"{where}: repeated value(s) {dup}; each value once")
    if kinds[0] == "str":
        return np.array(list(values), dtype=object)
    return np.asarray(values)


def _exact_numbers(where: str, values: Sequence[Any]) -> None:
    """SpaceError for a value the store or the job would not get exactly as written."""
    floats = any(isinstance(v, float | np.floating) for v in values)
    for v in values:
        if isinstance(v, float | np.floating) and math.isnan(v):
            raise SpaceError(
                f"{where}: NaN is not a value (it equals nothing, so its point could not be found again)"
            )
        if isinstance(v, int | np.integer) and not INT64[0] <= v <= INT64[1]:
            raise SpaceError(
                f"{where}: {v} is past the 64-bit integers the store holds; use a float or a string"
            )
        if floats and isinstance(v, int | np.integer) and abs(int(v)) > EXACT_INT and float(v) != int(v):
            raise SpaceError(
                f"{where}: {v} beside floats would become {float(v)!r}; write every value as an integer, "
                "or this one as a string"
            )


def _kind(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float | np.integer | np.floating):
        return "number"
    if isinstance(v, str):
        return "str"
    raise SpaceError(f"{where}: value {v!r} is a {type(v).__name__}; use numbers or strings")


def _python(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class Space:
    """Base: subclasses set ``dims``, ``shape``, ``coords`` and implement ``points``."""

    kind = ""
    settings = ""  # what else makes two spaces of the same layout different sweeps (a search's)
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    coords: dict[str, tuple[tuple[str, ...], np.ndarray]]

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names each point assigns."""
        return tuple(n for n in self.coords)

    def __len__(self) -> int:
        return math.prod(self.shape)

    def points(self) -> Iterator[Point]:
        raise NotImplementedError

    def fingerprint(self) -> str:
        """Hash of the dims and every point, in order: equal iff the dataset layout is equal."""
        h = hashlib.sha1(json.dumps([self.kind, self.dims, self.shape]).encode())
        for p in self.points():
            h.update(point_id(p.params).encode())
        return h.hexdigest()[:16]


class Grid(Space):
    """The Cartesian product of axes, in the order given (the last axis varies fastest)."""

    kind = "grid"

    def __init__(self, axes: Mapping[str, Sequence[Any]]) -> None:
        if not axes:
            raise SpaceError("params.grid: give at least one axis, e.g. {beta: [1, 2]}")
        check_names("params.grid", axes)
        self.axes = {n: _axis_values(f"params.grid.{n}", v) for n, v in axes.items()}
        self.dims = tuple(self.axes)
        self.shape = tuple(len(v) for v in self.axes.values())
        self.coords = {n: ((n,), v) for n, v in self.axes.items()}

    def points(self) -> Iterator[Point]:
        ranges = [range(n) for n in self.shape]
        values = list(self.axes.values())
        for index in itertools.product(*ranges):
            params = {n: _python(values[i][j]) for i, (n, j) in enumerate(zip(self.dims, index))}
            yield Point(index, params)


class _Listed(Space):
    """Points along one ``point`` dim; each parameter is a coordinate on it."""

    def _set_columns(self, columns: Mapping[str, np.ndarray]) -> None:
        check_names(f"params.{self.kind}", columns)
        self.columns = dict(columns)
        n = len(next(iter(self.columns.values())))
        self.dims, self.shape = (POINT_DIM,), (n,)
        self.coords = {name: ((POINT_DIM,), v) for name, v in self.columns.items()}

    def points(self) -> Iterator[Point]:
        for i in range(self.shape[0]):
            yield Point((i,), {n: _python(v[i]) for n, v in self.columns.items()})

    def _refuse_repeats(self) -> None:
        """SpaceError when two points are the same (they would share one id, log and checkpoint)."""
        first: dict[str, int] = {}
        for p in self.points():
            seen = first.setdefault(p.id, p.index[0])
            if seen != p.index[0]:
                raise SpaceError(
                    f"params.{self.kind}: points {seen} and {p.index[0]} are the same ({p.params}); "
                    "give each point once"
                )


class Zip(_Listed):
    """Axes of equal length walked together: point i takes the i-th value of each."""

    kind = "zip"

    def __init__(self, axes: Mapping[str, Sequence[Any]]) -> None:
        if not axes:
            raise SpaceError("params.zip: give at least one axis, e.g. {a: [1, 2], b: [3, 4]}")
        cols = {n: _axis_values(f"params.zip.{n}", v, unique=False) for n, v in axes.items()}
        lengths = {n: len(v) for n, v in cols.items()}
        if len(set(lengths.values())) != 1:
            raise SpaceError(f"params.zip: axes must have equal lengths, got {lengths}")
        self._set_columns(cols)
        self._refuse_repeats()


class Explicit(_Listed):
    """An explicit list of points, each a mapping with the same keys."""

    kind = "list"

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            raise SpaceError("params.list: give at least one point, e.g. [{a: 1}, {a: 2}]")
        keys = list(rows[0]) if isinstance(rows[0], Mapping) else None
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping) or list(row) != keys:
                raise SpaceError(f"params.list[{i}]: every point must be a mapping with keys {keys}")
        if not keys:
            raise SpaceError("params.list[0]: a point needs at least one parameter")
        cols = {}
        for k in keys:
            cols[k] = _axis_values(f"params.list[*].{k}", [row[k] for row in rows], unique=False)
        self._set_columns(cols)
        self._refuse_repeats()


@dataclass(frozen=True)
class Bounds:
    low: float
    high: float
    log: bool = False
    integer: bool = False

    def scale(self, u: np.ndarray) -> np.ndarray:
        lo, hi = (math.log(self.low), math.log(self.high)) if self.log else (self.low, self.high)
        x = lo + u * (hi - lo)
        x = np.exp(x) if self.log else x
        return np.floor(x).astype(int) if self.integer else x


def _bounds(where: str, spec: Any) -> Bounds:
    if isinstance(spec, Sequence) and not isinstance(spec, str) and len(spec) == 2:
        spec = {"low": spec[0], "high": spec[1]}
    if not isinstance(spec, Mapping) or not {"low", "high"} <= set(spec):
        raise SpaceError(f"{where}: give [low, high] or {{low: .., high: .., log: true}}")
    extra = set(spec) - {"low", "high", "log", "integer"}
    if extra:
        raise SpaceError(f"{where}: unknown key(s) {sorted(extra)}; allowed: low, high, log, integer")
    for flag in ("log", "integer"):
        if not isinstance(spec.get(flag, False), bool):
            raise SpaceError(f"{where}.{flag}: {spec[flag]!r} is not true or false; write {flag}: true")
    if any(isinstance(spec[k], bool) or not isinstance(spec[k], int | float) for k in ("low", "high")):
        raise SpaceError(f"{where}: low and high must be numbers (got {spec['low']!r}, {spec['high']!r})")
    try:
        b = Bounds(float(spec["low"]), float(spec["high"]), bool(spec.get("log")), bool(spec.get("integer")))
    except OverflowError:
        raise SpaceError(f"{where}: low and high must be finite numbers") from None
    if not (math.isfinite(b.low) and math.isfinite(b.high) and math.isfinite(b.high - b.low)):
        raise SpaceError(
            f"{where}: low ({b.low}) and high ({b.high}) must be finite, and so must their distance"
        )
    if b.integer and max(abs(b.low), abs(b.high)) > EXACT_INT:
        raise SpaceError(
            f"{where}: an integer axis draws within ±2**53 ({EXACT_INT}), where every integer is exact; "
            f"got [{spec['low']}, {spec['high']}]"
        )
    if not b.low < b.high:
        raise SpaceError(f"{where}: low ({b.low}) must be below high ({b.high})")
    if b.log and b.low <= 0:
        raise SpaceError(f"{where}: log scale needs low > 0")
    if b.integer:
        b = Bounds(b.low, b.high + 1, b.log, True)  # floor() of [low, high+1) covers high
    return b


class Random(_Listed):
    """``n`` points drawn uniformly (or log-uniformly) within bounds, seeded."""

    kind = "random"

    def __init__(self, n: int, seed: int, axes: Mapping[str, Any]) -> None:
        where = f"params.{self.kind}"
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_POINTS:
            raise SpaceError(f"{where}.n: give a number of points from 1 to {MAX_POINTS:,}, got {n!r}")
        if not isinstance(axes, Mapping) or not axes:
            raise SpaceError(f"{where}.axes: give at least one axis, e.g. {{lr: [0.001, 0.1]}}")
        check_names(f"{where}.axes", axes)
        bounds = {name: _bounds(f"{where}.axes.{name}", spec) for name, spec in axes.items()}
        unit = self._unit(n, len(bounds), seed)
        self._set_columns({name: b.scale(unit[:, j]) for j, (name, b) in enumerate(bounds.items())})

    @staticmethod
    def _unit(n: int, d: int, seed: int) -> np.ndarray:
        return np.random.default_rng(seed).random((n, d))


class LatinHypercube(Random):
    """``n`` points of a seeded Latin hypercube (scipy.stats.qmc) within bounds."""

    kind = "lhs"

    @staticmethod
    def _unit(n: int, d: int, seed: int) -> np.ndarray:
        from scipy.stats import qmc

        return qmc.LatinHypercube(d=d, seed=seed).random(n)


@dataclass(frozen=True)
class Choices:
    """A categorical search axis: one of ``values``."""

    values: tuple[Any, ...]


TRIAL_DIM = "trial"
SEARCH_KEYS = ("sampler", "n_trials", "seed", "axes", "objective", "direction")


def _search_axis(where: str, spec: Any) -> Bounds | Choices:
    """``[low, high]`` or ``{low, high, log, integer}`` (as ``random``); ``{choices: [...]}``, or
    a list that is not two numbers (``[adam, sgd]``, ``[1, 2, 4]``), is categorical."""
    if isinstance(spec, Mapping) and "choices" in spec:
        if set(spec) != {"choices"}:
            raise SpaceError(f"{where}: a categorical axis is {{choices: [a, b, ...]}} and nothing else")
        spec = spec["choices"]
    elif not isinstance(spec, Sequence) or isinstance(spec, str) or _two_numbers(spec):
        return _bounds(where, spec)
    values = _axis_values(where, spec)
    if len(values) < 2:
        raise SpaceError(f"{where}: give at least two choices")
    return Choices(tuple(_python(v) for v in values))


def _two_numbers(spec: Sequence[Any]) -> bool:
    return len(spec) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec)


class Trials(Space):
    """The ``n_trials`` trials of a search (``params.search``) along a ``trial`` dim.

    A trial's parameters are chosen by the search's sampler when it starts
    (:mod:`sweep.client.search`), so they are coordinates on ``trial`` that read NaN (or "" for a
    categorical axis of strings) until then. A point's parameters here are its trial number.
    """

    kind = "search"

    def __init__(self, spec: Mapping[str, Any]) -> None:
        where = "params.search"
        unknown = sorted(set(spec) - set(SEARCH_KEYS))
        if unknown:
            raise SpaceError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(SEARCH_KEYS)}")
        n = spec.get("n_trials")
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_POINTS:
            raise SpaceError(f"{where}.n_trials: give a number of trials from 1 to {MAX_POINTS:,}, got {n!r}")
        axes = spec.get("axes")
        if not isinstance(axes, Mapping) or not axes:
            raise SpaceError(
                f"{where}.axes: give at least one axis, e.g. {{lr: {{low: 1e-4, high: 0.1, log: true}}}}"
            )
        check_names(f"{where}.axes", axes)
        self.axes = {name: _search_axis(f"{where}.axes.{name}", a) for name, a in axes.items()}
        self.dims, self.shape = (TRIAL_DIM,), (n,)
        self.coords = {name: ((TRIAL_DIM,), _unset(a, n)) for name, a in self.axes.items()}
        self.settings = json.dumps(
            {k: v for k, v in spec.items() if k != "n_trials"}, sort_keys=True, default=str
        )

    def points(self) -> Iterator[Point]:
        for i in range(self.shape[0]):
            yield Point((i,), {TRIAL_DIM: i})

    def fingerprint(self) -> str:
        h = hashlib.sha1(super().fingerprint().encode())
        h.update(self.settings.encode())
        return h.hexdigest()[:16]


def _unset(axis: Bounds | Choices, n: int) -> np.ndarray:
    """A trial axis' coordinate before any trial ran: NaN, or "" for choices of strings."""
    if isinstance(axis, Choices) and isinstance(axis.values[0], str):
        return np.full(n, "", dtype=object)
    return np.full(n, np.nan)


SPACES = {
    "grid": Grid, "zip": Zip, "list": Explicit, "random": Random, "lhs": LatinHypercube, "search": Trials,
}  # fmt: skip


def parse_seed(where: str, value: Any) -> int:
    """A seed: a whole number from 0 to 2**63 - 1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64[1]:
        raise SpaceError(f"{where}: give a whole number from 0 to 2**63 - 1, got {value!r}")
    return value


def build_space(kind: str, spec: Any) -> Space:
    """Build the space named ``kind`` from its recipe value."""
    if kind in ("grid", "zip"):
        if not isinstance(spec, Mapping):
            raise SpaceError(f"params.{kind}: give a mapping of axis -> list of values")
        return SPACES[kind](spec)
    if kind == "list":
        if not isinstance(spec, Sequence) or isinstance(spec, str):
            raise SpaceError("params.list: give a list of points, e.g. [{a: 1}, {a: 2}]")
        return Explicit(spec)
    if kind in ("random", "lhs"):
        if not isinstance(spec, Mapping) or set(spec) - {"n", "seed", "axes"} or "n" not in spec:
            raise SpaceError(f"params.{kind}: give {{n: 16, seed: 0, axes: {{x: [0, 1]}}}}")
        return SPACES[kind](
            spec["n"], parse_seed(f"params.{kind}.seed", spec.get("seed", 0)), spec.get("axes") or {}
        )
    if kind == "search":
        if not isinstance(spec, Mapping):
            raise SpaceError("params.search: give {sampler: tpe, n_trials: 50, axes: {...}, objective: NAME}")
        return Trials(spec)
    raise SpaceError(f"params: unknown space {kind!r}; use one of {sorted(SPACES)}")
