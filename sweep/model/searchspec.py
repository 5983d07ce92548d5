"""The search part of a recipe (``params.search``, ``params.prune``), validated.

Beside the spaces (:mod:`sweep.model.space`): data and checks only, so the recipe model imports it
without the Optuna driver (:mod:`sweep.client.search`). Optuna itself is imported only to build a
pruner, which is how its options are checked.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.model.space import Choices, SpaceError, parse_seed

SAMPLERS = {
    "tpe": "TPESampler",
    "cmaes": "CmaEsSampler",
    "gp": "GPSampler",
    "qmc": "QMCSampler",
    "random": "RandomSampler",
    "nsga2": "NSGAIISampler",
}
SINGLE_OBJECTIVE = ("cmaes",)  # samplers that can't take several objectives
NEEDS = {"cmaes": "cmaes", "gp": "torch"}  # samplers that need another package
PRUNERS = {
    "asha": "SuccessiveHalvingPruner",
    "median": "MedianPruner",
    "hyperband": "HyperbandPruner",
    "none": "",
}
# each pruner's options (the keyword arguments of its Optuna class; tests pin them)
PRUNER_OPTIONS = {
    "asha": ("min_resource", "reduction_factor", "min_early_stopping_rate", "bootstrap_count"),
    "median": ("n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"),
    "hyperband": ("min_resource", "max_resource", "reduction_factor", "bootstrap_count"),
    "none": (),
}
DIRECTIONS = ("minimize", "maximize")


def _names(where: str, value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise SpaceError(f"{where}: give {what} as a name or a list of names")
    return tuple(items)


@dataclass(frozen=True)
class SearchSpec:
    """The search and pruning settings of a recipe, validated (axes are the space's)."""

    sampler: str
    seed: int | None
    objectives: tuple[str, ...]
    directions: tuple[str, ...]
    prune: str = "none"
    metric: str = ""
    prune_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, search: Mapping[str, Any], prune: Mapping[str, Any] | None) -> SearchSpec:
        """Validate ``params.search`` (its axes and n_trials are the space's) and ``params.prune``;
        SpaceError naming the key and the choices."""
        where = "params.search"
        if importlib.util.find_spec("optuna") is None:
            raise SpaceError(f"{where}: searching needs Optuna: pip install 'capped-sweep[search]'")
        sampler = str(search.get("sampler", "tpe"))
        if sampler not in SAMPLERS:
            raise SpaceError(
                f"{where}.sampler: unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}"
            )
        needed = NEEDS.get(sampler)
        if needed and importlib.util.find_spec(needed) is None:
            raise SpaceError(
                f"{where}.sampler: {sampler} needs the {needed!r} package (pip install {needed}); "
                "install it or choose another sampler"
            )
        if "objective" not in search:
            raise SpaceError(f"{where}.objective: name the job output (or sweep.report key) to optimise")
        objectives = _names(f"{where}.objective", search["objective"], "the objective")
        for o in objectives:
            if not o.isidentifier():
                raise SpaceError(
                    f"{where}.objective: {o!r} can never be an output's name (a job's outputs are "
                    "Python identifiers, e.g. transmission); name one the job returns or reports"
                )
        directions = _names(f"{where}.direction", search.get("direction", "minimize"), "the direction")
        for d in directions:
            if d not in DIRECTIONS:
                raise SpaceError(
                    f"{where}.direction: unknown direction {d!r}; choose one of {', '.join(DIRECTIONS)}"
                )
        if len(directions) == 1 and len(objectives) > 1:
            directions = directions * len(objectives)
        if len(directions) != len(objectives):
            raise SpaceError(
                f"{where}.direction: {len(directions)} directions for {len(objectives)} objectives; "
                "give one each"
            )
        if len(objectives) > 1 and sampler in SINGLE_OBJECTIVE:
            raise SpaceError(
                f"{where}.sampler: {sampler} optimises one objective; use tpe, nsga2, gp or random"
            )
        seed = search.get("seed")
        if seed is not None:
            seed = parse_seed(f"{where}.seed", seed)
        spec = cls(sampler, seed, objectives, directions)
        return spec if prune is None else spec._with_prune(prune)

    def _with_prune(self, prune: Mapping[str, Any]) -> SearchSpec:
        where = "params.prune"
        kind = str(prune.get("kind", "none"))
        if kind not in PRUNERS:
            raise SpaceError(f"{where}.kind: unknown pruner {kind!r}; choose one of {', '.join(PRUNERS)}")
        options = {k: v for k, v in prune.items() if k not in ("kind", "metric")}
        unknown = sorted(set(options) - set(PRUNER_OPTIONS[kind]))
        if unknown:
            allowed = ", ".join(PRUNER_OPTIONS[kind]) or "none"
            raise SpaceError(f"{where}: unknown option(s) {unknown} for kind {kind}; allowed: {allowed}")
        metric = prune.get("metric", "")
        if kind != "none":
            if not isinstance(metric, str) or not metric:
                raise SpaceError(f"{where}.metric: name the sweep.report key the pruner watches")
            if len(self.objectives) > 1:
                raise SpaceError(f"{where}: Optuna prunes single-objective searches only; drop params.prune")
            try:
                pruner(kind, options)
            except (TypeError, ValueError) as exc:
                raise SpaceError(f"{where}: {exc}") from None
        return SearchSpec(self.sampler, self.seed, self.objectives, self.directions, kind, metric, options)

    @property
    def prunes(self) -> bool:
        return self.prune != "none"


def describe(spec: SearchSpec, space: Any) -> list[str]:
    """What ``sweep validate`` says of a search: sampler, trials, objectives, axes, pruner."""
    goal = ", ".join(f"{d} {o}" for o, d in zip(spec.objectives, spec.directions))
    axes = []
    for name, axis in space.axes.items():
        if isinstance(axis, Choices):
            axes.append(f"{name} one of {list(axis.values)}")
        else:
            high = axis.high - 1 if axis.integer else axis.high
            kind = " log" if axis.log else ""
            axes.append(f"{name} in [{axis.low:g}, {high:g}]{kind}{' integer' if axis.integer else ''}")
    prune = (
        f"{spec.prune} on {spec.metric} {dict(spec.prune_options) or ''}".rstrip() if spec.prunes else "none"
    )
    return [
        f"search    {spec.sampler}, {len(space)} trials, seed {spec.seed}: {goal}",
        f"axes      {'; '.join(axes)}",
        f"prune     {prune}",
        "trials    asked of the sampler as the search runs (along dim trial)",
    ]


def pruner(kind: str, options: Mapping[str, Any]) -> Any:
    """The Optuna pruner ``kind`` with ``options`` (its class's keyword arguments)."""
    import optuna

    name = PRUNERS[kind]
    return getattr(optuna.pruners, name)(**options) if name else optuna.pruners.NopPruner()
