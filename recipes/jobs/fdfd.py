"""A small adjoint inverse-design job: a 1D dielectric cavity that concentrates light.

The field obeys the 1D Helmholtz equation ``E'' + k0^2 eps(x) E = -J`` on a uniform grid,
with stretched-coordinate absorbing layers (PML) at both ends, solved directly with
``jnp.linalg.solve``. The design is a density ``rho`` in [0, 1] on the cells of the design
region, projected with a smoothed Heaviside of sharpness ``beta`` to a permittivity between
1 and ``eps_max``. The objective is the field intensity at a probe in the middle of the
design region, normalised by the same intensity with no structure (1.0: as good as empty
space; a good resonant cavity reaches tens).
``jax.value_and_grad`` differentiates through the solve (the adjoint method), and Adam on
the unconstrained latent design does the rest.

Only ``import``-time work here is defining functions: jax is imported inside the job so the
module can be inspected without it. The step function is jitted once per process with the
physical parameters as traced arguments, so a warm child compiles it once for a whole sweep.
"""

from __future__ import annotations

from functools import cache


@cache
def _compiled(n: int, n_design: int):
    import jax
    import jax.numpy as jnp

    dx = 1.0 / n * 4.0  # the domain is 4 wavelength units long
    n_pml = n // 10
    lo = (n - n_design) // 2
    source, probe = n_pml + 2, lo + n_design // 2  # the probe sits mid-design: a cavity

    def operator(eps, k0):
        # Stretched coordinates s(x) = 1 + i sigma(x)/k0 in the PML; A = d/dx (1/s) d/dx (1/s) + k0^2 eps.
        depth = jnp.maximum(jnp.maximum(n_pml - jnp.arange(n), jnp.arange(n) - (n - 1 - n_pml)), 0) / n_pml
        s = 1.0 + 1j * 6.0 * depth**3
        inv = 1.0 / (s * dx)
        main = -2.0 * inv * inv + k0**2 * eps
        off = inv[:-1] * inv[1:]
        return jnp.diag(main) + jnp.diag(off, 1) + jnp.diag(off, -1)

    def field(eps, k0):
        rhs = jnp.zeros(n, complex).at[source].set(1.0 / dx)
        return jnp.linalg.solve(operator(eps.astype(complex), k0), -rhs)

    def permittivity(latent, beta, eps_max):
        rho = jax.nn.sigmoid(latent)
        projected = (jnp.tanh(beta * 0.5) + jnp.tanh(beta * (rho - 0.5))) / (2 * jnp.tanh(beta * 0.5))
        return jnp.ones(n).at[lo : lo + n_design].set(1.0 + (eps_max - 1.0) * projected)

    def objective(latent, k0, beta, eps_max, reference):
        e = field(permittivity(latent, beta, eps_max), k0)
        return jnp.abs(e[probe]) ** 2 / reference

    def reference_intensity(k0):
        return jnp.abs(field(jnp.ones(n), k0)[probe]) ** 2

    @jax.jit
    def step(latent, m, v, t, k0, beta, eps_max, reference, lr):
        value, grad = jax.value_and_grad(objective)(latent, k0, beta, eps_max, reference)
        grad = -grad  # maximise
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        m_hat, v_hat = m / (1 - 0.9**t), v / (1 - 0.999**t)
        return latent - lr * m_hat / (jnp.sqrt(v_hat) + 1e-8), m, v, value

    x = (jnp.arange(n_design) + lo) * dx
    return step, jax.jit(reference_intensity), jax.jit(permittivity), x


def optimize(
    wavelength: float = 1.0,
    beta: float = 4.0,
    seed: int = 0,
    steps: int = 30,
    lr: float = 0.1,
    eps_max: float = 6.0,
    n: int = 240,
    n_design: int = 80,
    report_every: int = 0,
    checkpoint_every: int = 10,
    keep_best: bool = False,
):
    """Optimise the stack for one (wavelength, beta, seed); returns objective and design.

    With ``report_every`` > 0 the objective is sent with ``sweep.report`` every that many
    steps (a search's pruner watches it). ``keep_best=True`` keeps the best design seen, as a
    designer would: ``objective`` and ``design`` are then the best step's, ``best_objective``
    (the highest objective so far, per step) is returned and reported beside ``objective``.
    Adam's objective jumps as the design locks onto a resonance and off it again; the best
    so far does not fall, and a pruner can compare it.

    Every ``checkpoint_every`` steps (0: never) the optimiser's state (and the best design) is
    saved with ``sweep.checkpoint``; an attempt that follows a killed or timed-out one goes on
    from there (``sweep.restore``) and ends with the same design."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import xarray as xr

    import sweep

    step, reference_intensity, permittivity, x = _compiled(n, n_design)
    k0 = 2 * jnp.pi / wavelength
    reference = reference_intensity(k0)
    saved = sweep.restore()
    if saved is None:
        latent = 0.5 * jax.random.normal(jax.random.PRNGKey(seed), (n_design,))
        m = v = jnp.zeros(n_design)
        history, start = [], 1
        best_value, best = -jnp.inf, latent
    else:
        latent, m, v = (jnp.asarray(a) for a in saved["adam"])
        history, start = list(saved["history"]), saved["t"] + 1
        best_value, best = saved.get("best", (-np.inf, saved["adam"][0]))
    for t in range(start, steps + 1):
        scored = latent  # the step's value is this design's, before Adam moves it
        latent, m, v, value = step(latent, m, v, t, k0, beta, eps_max, reference, lr)
        history.append(value)
        if keep_best:  # on the device: no wait for the step to finish
            best = jnp.where(value > best_value, scored, best)
            best_value = jnp.fmax(value, best_value)
        if report_every and t % report_every == 0:
            reported = {"best_objective": float(best_value)} if keep_best else {}
            sweep.report(step=t, objective=float(value), **reported)
        if checkpoint_every and t % checkpoint_every == 0 and t < steps:
            state = {
                "t": t,
                "adam": tuple(np.asarray(a) for a in (latent, m, v)),
                "history": [float(h) for h in history],
            }
            if keep_best:
                state["best"] = (float(best_value), np.asarray(best))
            sweep.checkpoint(state)
    history = np.asarray(jax.block_until_ready(jnp.stack(history)))
    iteration = {"dims": ["iteration"], "coords": {"iteration": np.arange(1, steps + 1)}}
    out = {"objective": float(history[-1])}
    if keep_best:
        latent, out["objective"] = best, float(best_value)  # the design's own, NaN steps skipped
        out["best_objective"] = xr.DataArray(np.fmax.accumulate(history), **iteration)
    eps = permittivity(latent, beta, eps_max)[(n - n_design) // 2 :][:n_design]
    return {
        **out,
        "history": xr.DataArray(history, **iteration),
        "design": xr.DataArray(np.asarray(eps), dims=["x"], coords={"x": np.asarray(x)}),
    }


def noop(**params) -> dict:
    """Does nothing with any parameters; measures the orchestration overhead per point."""
    return {"ok": 1.0}
