"""Recipe values as users write them: YAML with 1.2's numbers, sizes (``4GiB``), durations
(``90s``, ``2h``) and factors."""

from __future__ import annotations

import re
from typing import Any

import yaml
from dask.utils import parse_bytes, parse_timedelta


class _Loader(yaml.SafeLoader):
    """YAML with 1.2's numbers: ``1e-3``, ``2E+2`` and ``.5`` are floats, not strings.

    PyYAML follows YAML 1.1, whose floats need a dot (``1.0e-3``); a recipe's ``1e-3`` would
    reach the job as the string ``'1e-3'``. Integers keep their own resolver, which runs first.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def _no_duplicate_keys(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    """A mapping whose keys are each given once: a second ``resources:`` would silently drop
    the first one's keys."""
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"a mapping's key can't be {key!r}", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {key!r} is given twice (first on line {seen[key].line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


def load_yaml(text: str) -> Any:
    """Parse recipe YAML (and ``--set`` values) with YAML 1.2's numbers. A key given twice, a
    recursive anchor (``&x [*x]``) and an integer of more digits than Python reads are YAML
    errors (:class:`yaml.YAMLError`)."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:  # int() past sys.get_int_max_str_digits()
        raise yaml.YAMLError(f"a number too long to read ({str(exc).split(':')[0]})") from None
    if _recursive(data):
        raise yaml.YAMLError("an anchor refers to itself (&x [*x]): a recipe is a finite tree")
    return data


def _recursive(data: Any, path: tuple[int, ...] = ()) -> bool:
    if isinstance(data, dict | list):
        if id(data) in path:
            return True
        items = data.values() if isinstance(data, dict) else data
        return any(_recursive(v, (*path, id(data))) for v in items)
    return False


MAX_SIZE = 1 << 60  # one exbibyte: a larger size is a typo


def _size(v: Any) -> int | None:
    """Bytes from ``2GiB``, ``512MB`` or a whole number; None from None. ``''``, a float that
    is not whole, and anything past :data:`MAX_SIZE` are refused."""
    if v is None:
        return v
    size: Any = None
    if isinstance(v, int) and not isinstance(v, bool):
        size = v
    elif isinstance(v, str) and v.strip() and re.search(r"\d", v):
        try:
            size = parse_bytes(v)
        except (ValueError, TypeError, AttributeError, IndexError, OverflowError):
            pass
    if size is None or not 0 <= size <= MAX_SIZE:
        raise ValueError(f"{v!r} is not a size (up to 1 EiB); write e.g. 2GiB, 512MB or a number of bytes")
    return int(size)


MAX_FACTOR = 1000.0


def _factor(v: Any) -> float | None:
    """A factor from ``2``, ``1.5`` or ``"2x"``; None from None."""
    if v is None:
        return None
    ok = isinstance(v, int | float | str) and not isinstance(v, bool)
    text = str(v).strip().lower().removesuffix("x") if ok else ""
    try:
        factor = float(text)
    except ValueError:
        factor = 0.0
    if not 1 < factor <= MAX_FACTOR:
        raise ValueError(f"{v!r} is not a factor above 1 (up to {MAX_FACTOR:g}); write e.g. 2x or 1.5")
    return factor


MAX_DURATION_S = 366 * 86400.0  # longer durations are typos (1e30, 99999h), not plans


def _duration(v: Any) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"20min"``, ``"2h"`` or ``"HH:MM:SS"``; None from
    ``None`` or ``"none"``."""
    if v is None or (isinstance(v, str) and v.strip().lower() == "none"):
        return None
    if isinstance(v, str) and re.fullmatch(r"\d+(:\d{1,2}){1,2}", v.strip()):
        head, *rest = (int(part) for part in v.strip().split(":"))
        if any(part >= 60 for part in rest):
            raise ValueError(f"{v!r} is not a time: minutes and seconds go up to 59; write e.g. 01:30:00")
        clock = head
        for part in rest:
            clock = clock * 60 + part
        return float(clock)
    if isinstance(v, str):
        v = re.sub(r"(?<=[\d\s])mins?$", "m", v.strip())  # dask knows "m", not "min"
    seconds: float | None = None
    if isinstance(v, int | float) and not isinstance(v, bool) or isinstance(v, str) and re.search(r"\d", v):
        try:
            seconds = float(parse_timedelta(v))
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError):
            pass
    if seconds is None or not 0 <= seconds <= MAX_DURATION_S:
        raise ValueError(
            f"{v!r} is not a duration (from 0 to a year); write e.g. 90s, 20min, 2h or a number of seconds"
        )
    return seconds
