"""The transmission of a 2D silicon waveguide in Meep (FDTD): a job meant to run on MPI ranks.

``transmission(width=..., resolution=...)`` launches a Gaussian pulse (a plain current source,
so it runs on Meep builds without MPB, as Debian's MPI build is) into a silicon waveguide of
``width`` um in silica and measures the flux through a plane near the far end at
``frequencies`` frequencies around 1.55 um, for a fixed simulated time.

Under ``resources.ranks: n`` every rank runs this function: Meep splits the cell into n
chunks, one per rank, and ``get_fluxes`` returns the same sums on every rank; rank 0's return
value is the point's. ``processes`` says how many ranks Meep saw, ``rank`` which one
returned. Meep prints from rank 0 only.
"""

from __future__ import annotations

SILICON = 12.0
SILICA = 2.0736
PML = 1.0


def transmission(width: float = 0.5, resolution: int = 20, frequencies: int = 5, until: float = 60.0) -> dict:
    import meep as mp
    import numpy as np

    import sweep

    mp.verbosity(0)
    cell = mp.Vector3(8, 4)
    fcen, df = 1 / 1.55, 0.2
    sim = mp.Simulation(
        cell_size=cell,
        boundary_layers=[mp.PML(PML)],
        geometry=[mp.Block(mp.Vector3(mp.inf, width), material=mp.Medium(epsilon=SILICON))],
        default_material=mp.Medium(epsilon=SILICA),
        sources=[
            mp.Source(
                mp.GaussianSource(fcen, fwidth=df),
                component=mp.Ez,
                center=mp.Vector3(-2.5, 0),
                size=mp.Vector3(0, width),
            )
        ],
        resolution=resolution,
    )
    monitor = sim.add_flux(
        fcen, df, frequencies, mp.FluxRegion(center=mp.Vector3(2.5, 0), size=mp.Vector3(0, 2))
    )
    sim.run(until=until)
    flux = np.asarray(mp.get_fluxes(monitor))
    return {
        "flux": flux,
        "total": float(flux.sum()),
        "processes": mp.count_processors(),
        "rank": sweep.rank(),
    }
