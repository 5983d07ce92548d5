"""invrs-gym photonic inverse-design challenges, optimised with invrs-opt (``.[photonics]``).

``optimize(challenge=..., beta=..., seed=..., steps=...)`` builds a challenge from
``invrs_gym.challenges.BY_NAME``, starts from its seeded initial design, runs an
``invrs_opt.density_lbfgsb`` optimiser (``optimizer="lbfgsb"``) or Adam through
``invrs_opt.density_wrapped_optax`` (``optimizer="adam"``, step size ``learning_rate``) for
``steps`` steps, and returns the loss, the best loss so far and the challenge's evaluation
metric per step, the final design as a DataArray (dims ``x``, ``y``), and the challenge's final
metrics. Each step is also sent with :func:`sweep.report` (``loss``, ``best_loss``,
``metric``).

``keep_best=True`` keeps the best design seen, as a designer would: the design returned and
``final_loss``/``final_metric`` are those of the step (or the final update) with the lowest
loss, not of the last update. Adam's loss oscillates late in a run; the best loss so far does
not, and a pruner can compare it (``best_loss``).

Two things every run here needs:

* ``import invrs_gym`` downloads the refractiveindex.info database at import time (through
  ``refractiveindex2``), which fails offline (compute nodes, CI). Only the ``bayer_sorter``
  and ``meta_atom_library`` challenges use that data, so a stand-in ``refractiveindex2`` is
  installed first; it raises a clear error if a challenge really asks for material data.
* Pinned to one core, ``density_lbfgsb``'s host callback can wait forever on an array XLA's
  single worker thread has not finished; ``jax.block_until_ready`` on the value and gradient
  before ``opt.update`` avoids it.
"""

from __future__ import annotations

import sys
import types

OFFLINE_CHALLENGES = ("bayer_sorter", "meta_atom_library")
OPTIMIZERS = ("lbfgsb", "adam")


class _OfflineMaterial:
    """Stands in for ``refractiveindex2.RefractiveIndexMaterial`` when there is no network."""

    def __init__(self, **where: str) -> None:
        self.where = where

    def __getattr__(self, name: str):
        raise RuntimeError(
            f"material data for {self.where} is unavailable offline (refractiveindex2 downloads it); "
            f"the challenges {OFFLINE_CHALLENGES} need it"
        )


def _offline_materials() -> None:
    if "refractiveindex2" in sys.modules:
        return
    module = types.ModuleType("refractiveindex2")
    module.RefractiveIndexMaterial = _OfflineMaterial
    sys.modules["refractiveindex2"] = module


def optimize(
    challenge: str = "ceviche_lightweight_waveguide_bend",
    beta: float = 2.0,
    seed: int = 0,
    steps: int = 10,
    wavelengths_nm: list[float] | None = None,
    optimizer: str = "lbfgsb",
    learning_rate: float = 0.05,
    keep_best: bool = False,
) -> dict:
    """Optimise one challenge from one seeded start; see the module docstring."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; one of {OPTIMIZERS}")
    if challenge in OFFLINE_CHALLENGES:
        raise ValueError(f"challenge {challenge!r} needs material data that is not available offline")
    _offline_materials()
    import invrs_gym
    import invrs_opt
    import jax
    import numpy as np
    import xarray as xr

    import sweep

    try:
        make = invrs_gym.challenges.BY_NAME[challenge]
    except KeyError:
        raise ValueError(
            f"unknown challenge {challenge!r}; one of {sorted(invrs_gym.challenges.BY_NAME)}"
        ) from None
    c = make(**({"wavelengths_nm": wavelengths_nm} if wavelengths_nm else {}))
    params = c.component.init(jax.random.PRNGKey(seed))
    if optimizer == "adam":
        import optax

        opt = invrs_opt.density_wrapped_optax(optax.adam(learning_rate), beta=beta)
    else:
        opt = invrs_opt.density_lbfgsb(beta=beta)
    state = opt.init(params)

    def loss_fn(p):
        response, aux = c.component.response(p)
        return c.loss(response), (response, aux)

    value_and_grad = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    losses, metrics = [], []
    best = (float("inf"), None)  # (loss, params) of the best step so far
    for i in range(steps):
        p = opt.params(state)
        (value, (response, aux)), grad = value_and_grad(p)
        value, grad = jax.block_until_ready((value, grad))  # the one-core deadlock, see above
        metric = float(c.eval_metric(response))
        losses.append(float(value))
        metrics.append(metric)
        if losses[-1] < best[0]:
            best = (losses[-1], p)
        sweep.report(step=i, loss=losses[-1], best_loss=best[0], metric=metric)
        state = opt.update(grad=grad, value=value, params=p, state=state)
    final = opt.params(state)
    response, _ = c.component.response(final)
    if keep_best and best[1] is not None and best[0] < float(c.loss(response)):
        final = best[1]
        response, _ = c.component.response(final)
    density = np.asarray(_density_array(final))
    step = np.arange(steps)
    return {
        "loss": xr.DataArray(np.asarray(losses), dims=["step"], coords={"step": step}),
        "best_loss": xr.DataArray(np.minimum.accumulate(losses), dims=["step"], coords={"step": step}),
        "metric": xr.DataArray(np.asarray(metrics), dims=["step"], coords={"step": step}),
        "design": xr.DataArray(density, dims=["x", "y"]),
        "final_loss": float(c.loss(response)),
        "final_metric": float(c.eval_metric(response)),
    }


def _density_array(params):
    """The density array inside a challenge's params (a totypes Density2DArray or a dict)."""
    import jax

    leaves = [
        leaf
        for leaf in jax.tree_util.tree_leaves(params, is_leaf=lambda x: hasattr(x, "array"))
        if hasattr(leaf, "array")
    ]
    return leaves[0].array if leaves else jax.tree_util.tree_leaves(params)[0]
