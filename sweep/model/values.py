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


def load_yaml(text: str) -> Any:
    """Parse recipe YAML (and ``--set`` values) with YAML 1.2's numbers."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def _size(v: Any) -> int | None:
    if v is None or isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return parse_bytes(v)
        except (ValueError, TypeError):
            pass
    raise ValueError(f"{v!r} is not a size; write e.g. 2GiB, 512MB or a number of bytes")


def _factor(v: Any) -> float | None:
    """A factor from ``2``, ``1.5`` or ``"2x"``; None from None."""
    if v is None:
        return None
    text = str(v).strip().lower().removesuffix("x") if not isinstance(v, bool) else ""
    try:
        factor = float(text)
    except ValueError:
        factor = 0.0
    if not factor > 1:
        raise ValueError(f"{v!r} is not a factor above 1; write e.g. 2x or 1.5")
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
    if not isinstance(v, bool):
        try:
            seconds = float(parse_timedelta(v))
        except (ValueError, TypeError, KeyError):
            pass
    if seconds is None or not 0 <= seconds <= MAX_DURATION_S:
        raise ValueError(
            f"{v!r} is not a duration (from 0 to a year); write e.g. 90s, 20min, 2h or a number of seconds"
        )
    return seconds
