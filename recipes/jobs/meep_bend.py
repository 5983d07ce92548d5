"""A 2D waveguide bend designed by adjoint optimisation in Meep, through ``meep.adjoint.MeepJaxWrapper``.

``optimize(size=..., seed=..., steps=...)`` sets up a 90-degree bend in a 2D FDTD cell: a
silicon waveguide enters from the left along x, another leaves upwards along y, and between
them sits a square design region of side ``size`` (um), a ``MaterialGrid`` that blends silica
(0) and silicon (1) cell by cell. An eigenmode source launches the fundamental mode into the
input guide; eigenmode monitors on the input and output guides measure the mode coefficients
at two wavelengths around 1.55 um. The objective is the transmission into the output guide's
fundamental mode, ``mean(|out / in|^2)`` over the wavelengths (1.0: every bit of light turns
the corner).

``MeepJaxWrapper`` is a ``jax.custom_vjp``: its forward pass is one FDTD run, its gradient one
adjoint run, so ``jax.value_and_grad`` of the objective costs two simulations. The design is
``sigmoid(latent)``; Adam ascends the latent variables from a seeded random start near 0.5.

Returns the objective per step (``objective``, dims ``step``), the final design (``design``,
dims ``x``, ``y``: its shape follows ``size`` and ``design_resolution``, so a sweep over
``size`` stores designs padded with NaN; :func:`sweep.unpadded` gives one back), and
``initial``/``final`` objectives. Each step is also sent with :func:`sweep.report`, and the
optimiser's state is saved with :func:`sweep.checkpoint`, so that a retried or resumed attempt
goes on from its last step.

Meep's own caveats met here: the wrapper needs two or more frequencies (one fails in its
vector-Jacobian product), it is eager (no ``jax.jit``), and it prints progress unless
``mp.verbosity(0)``. Import cost is in the job, not at module import, so the module can be
inspected without Meep.
"""

from __future__ import annotations

SILICON = 12.0  # relative permittivity at 1.55 um
SILICA = 2.0736  # 1.44 ** 2
WIDTH = 0.5  # waveguide width, um
PML = 1.0  # absorbing layer thickness, um
STUB = 1.0  # waveguide length between the design region and the PML, um


def _problem(size: float, resolution: int, design_resolution: int, wavelengths: list[float]):
    """The bend's simulation wrapped for JAX, and the shape of its design grid."""
    import meep as mp
    import meep.adjoint as mpa

    mp.verbosity(0)
    si, sio2 = mp.Medium(epsilon=SILICON), mp.Medium(epsilon=SILICA)
    side = 2 * PML + 2 * STUB + size
    half = size / 2
    shape = (round(design_resolution * size) + 1, round(design_resolution * size) + 1)
    grid = mp.MaterialGrid(mp.Vector3(*shape), sio2, si, grid_type="U_MEAN")
    region = mpa.DesignRegion(grid, volume=mp.Volume(center=mp.Vector3(), size=mp.Vector3(size, size)))
    arm = PML + STUB + 0.5  # reaches into the design region and through the PML
    geometry = [
        mp.Block(center=mp.Vector3(-half - arm / 2 + 0.5), size=mp.Vector3(arm, WIDTH), material=si),
        mp.Block(center=mp.Vector3(0, half + arm / 2 - 0.5), size=mp.Vector3(WIDTH, arm), material=si),
        mp.Block(center=region.center, size=region.size, material=grid),
    ]
    frequencies = [1 / w for w in wavelengths]
    fcen = sum(frequencies) / len(frequencies)
    df = 2 * (max(frequencies) - min(frequencies)) + 0.1 * fcen
    x_in = -half - STUB + 0.2
    sources = [
        mp.EigenModeSource(
            mp.GaussianSource(frequency=fcen, fwidth=df),
            center=mp.Vector3(x_in),
            size=mp.Vector3(0, 4 * WIDTH),
            eig_band=1,
            eig_parity=mp.ODD_Z,
        )
    ]
    sim = mp.Simulation(
        cell_size=mp.Vector3(side, side),
        boundary_layers=[mp.PML(PML)],
        geometry=geometry,
        sources=sources,
        default_material=sio2,
        resolution=resolution,
    )
    monitors = [
        mpa.EigenmodeCoefficient(
            sim,
            mp.Volume(center=mp.Vector3(x_in + 0.3), size=mp.Vector3(0, 4 * WIDTH)),
            mode=1,
            eig_parity=mp.ODD_Z,
        ),
        mpa.EigenmodeCoefficient(
            sim,
            mp.Volume(center=mp.Vector3(0, half + STUB - 0.3), size=mp.Vector3(4 * WIDTH, 0)),
            mode=1,
            eig_parity=mp.ODD_Z,
        ),
    ]
    wrapped = mpa.MeepJaxWrapper(sim, sources, monitors, [region], frequencies, dft_threshold=1e-4)
    return wrapped, shape


def optimize(
    size: float = 1.6,
    seed: int = 0,
    steps: int = 4,
    learning_rate: float = 0.5,
    resolution: int = 10,
    design_resolution: int = 10,
    wavelengths: list[float] | None = None,
) -> dict:
    """Optimise one bend from one seeded start; see the module docstring."""
    if size <= 0 or steps < 1:
        raise ValueError(f"size must be > 0 and steps >= 1, got size={size}, steps={steps}")
    wavelengths = wavelengths or [1.5, 1.6]
    if len(wavelengths) < 2:
        raise ValueError("MeepJaxWrapper needs two or more wavelengths (one fails in its gradient)")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import xarray as xr

    import sweep

    wrapped, shape = _problem(size, resolution, design_resolution, wavelengths)

    def transmission(latent):
        coefficients = wrapped([jax.nn.sigmoid(latent)])
        return jnp.mean(jnp.abs(coefficients[1, :] / coefficients[0, :]) ** 2)

    value_and_grad = jax.value_and_grad(transmission)
    saved = sweep.restore()  # a retried or resumed attempt goes on from its last step
    if saved is None:
        latent = jnp.asarray(np.random.default_rng(seed).normal(0.0, 0.1, shape))
        m, v = jnp.zeros(shape), jnp.zeros(shape)
        history: list[float] = []
    else:
        latent, m, v = (jnp.asarray(a) for a in saved["adam"])
        history = list(saved["history"])
    for i in range(len(history), steps):
        value, grad = value_and_grad(latent)
        history.append(float(value))
        sweep.report(step=i, objective=float(value))
        # Adam, ascending; the gradient's scale varies a lot with size, Adam doesn't mind
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        t = i + 1
        latent = latent + learning_rate * (m / (1 - 0.9**t)) / (jnp.sqrt(v / (1 - 0.999**t)) + 1e-12)
        sweep.checkpoint({"adam": tuple(np.asarray(a) for a in (latent, m, v)), "history": history})
    final = float(transmission(latent))
    step = np.arange(steps)
    return {
        "objective": xr.DataArray(np.asarray(history), dims=["step"], coords={"step": step}),
        "design": xr.DataArray(np.asarray(jax.nn.sigmoid(latent)), dims=["x", "y"]),
        "initial": history[0],
        "final": final,
    }
