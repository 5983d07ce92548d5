"""The plain amounts of a recipe (:data:`sweep.capacity.resources.AMOUNTS`), read where they
are written: ``resources.<name>`` (what a point asks) and ``cluster.<name>`` (what a worker of
the recipe's cluster offers).

Both sections gather them into one mapping, ``amounts``, as the model validates the section:
a new amount is an entry of the table, and neither the recipe's models nor anything
downstream of them names it.

Examples
--------
>>> gather({"threads": 2})
{'threads': 2}
"""

from __future__ import annotations

import math
from typing import Any

from sweep.capacity.resources import AMOUNTS
from sweep.model.values import _size

FIELD = "amounts"  # the mapping both sections keep them in
MAX_COUNT = 1e15  # a larger count is a typo


def gather(data: Any) -> Any:
    """``data`` (a section as written) with every :data:`AMOUNTS` key moved into its
    :data:`FIELD` mapping, each value checked and read (bytes or a number); ValueError naming
    the key and the fix for a value that is no amount."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    given = data.pop(FIELD, None) or {}
    if not isinstance(given, dict):
        raise ValueError(f"{FIELD}: {given!r} is not a mapping of amounts")
    unknown = sorted(set(given) - set(AMOUNTS))
    if unknown:
        known = ", ".join(AMOUNTS) or "none"
        raise ValueError(f"{FIELD}: unknown amount(s) {unknown}; the amounts are: {known}")
    amounts = {**given, **{name: data.pop(name) for name in AMOUNTS if name in data}}
    found = {name: read(name, value) for name, value in amounts.items() if value is not None}
    if found:
        data[FIELD] = found
    return data


def read(name: str, value: Any) -> float:
    """The amount ``value`` written for ``name``: bytes of a size, else a number, above zero
    either way."""
    amount = AMOUNTS[name]
    if amount.size:
        if isinstance(value, float) and value.is_integer():  # as read back: bytes kept as a float
            value = int(value)
        try:
            number = float(_size(value) or 0)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        example = "20GB"
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        number = float(value) if ok else math.nan
        example = "4"
    if not 0 < number <= (math.inf if amount.size else MAX_COUNT):
        raise ValueError(
            f"{name}: {value!r} is no amount of {amount.what} above zero; write e.g. {name}: {example}"
        )
    return number
