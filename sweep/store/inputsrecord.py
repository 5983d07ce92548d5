"""The inputs of a store's runs: what this run uses (``sweep_inputs``, the recipe it came
from) and the id of the inputs each point ran with (``sweep_inputs_seen``), from the source
files its child reported (:mod:`sweep.model.inputs`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sweep.model import inputs
from sweep.store import attributes
from sweep.store.creation import _now

log = logging.getLogger(__name__)


class InputsRecord:
    """The inputs record of the store at ``path`` (``group``: its zarr group; ``set_attrs``:
    writes its attributes)."""

    def __init__(self, path: Path, group: Any, set_attrs: Callable[..., None]) -> None:
        self.path, self.group, self.set_attrs = path, group, set_attrs
        self.now: inputs.Inputs | None = None  # this run's inputs (set by record)
        self.job_file: str | None = None
        self._seen: dict[str, str] = json.loads(group.attrs.get(attributes.INPUTS_SEEN, "{}"))
        self._ids_by_sources: dict[tuple[tuple[str, str], ...], str] = {}

    def record(self, loaded: Any, now: inputs.Inputs, kept_over: list[str]) -> None:
        """Store the inputs this run uses; ``kept_over`` (changes accepted with keep_done) go
        to ``sweep_history`` with the time."""
        self.now, self.job_file = now, inputs.job_file(loaded.job)
        extra: dict[str, Any] = {}
        if kept_over:
            history = json.loads(self.group.attrs.get(attributes.HISTORY, "[]"))
            extra[attributes.HISTORY] = [*history, {"time": _now(), "kept_done_over": kept_over}]
            log.warning("%s: inputs changed, done points kept: %s", self.path, "; ".join(kept_over))
        self.set_attrs(
            **extra,
            **{
                attributes.INPUTS: now.to_json(),
                attributes.RECIPE: loaded.effective_text,
                attributes.RECIPE_SOURCE: loaded.text,
                attributes.NAME_FROM: loaded.name_from,
                attributes.RECIPE_DIR: str(Path(loaded.base).resolve()),
            },
        )

    def ident(self, sources: Mapping[str, str]) -> str:
        """The id of the inputs a point ran with, given the source files its job imported (a
        new id is added to the store's ``sweep_inputs_seen``); "" before :meth:`record`."""
        key = tuple(sorted(sources.items()))
        ident = self._ids_by_sources.get(key)
        if ident is None and self.now is not None:
            ran = self.now.ran(dict(sources), self.job_file)
            ident = self._ids_by_sources[key] = ran.ident()
            if ident not in self._seen:
                self._seen[ident] = ran.to_json()
                self.set_attrs(**{attributes.INPUTS_SEEN: self._seen})
        return ident or ""
