"""How well an optimisation's early objective ranks its final one: what decides whether
pruning a search can pay. Shared by ``adaptive.py`` (the searches) and ``early_ranks.py``
(random trials on one node, without Dask)."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

EARLY = (0.1, 0.2, 0.5)  # fractions of the steps whose objective is ranked against the final one


def early_ranks(histories: np.ndarray, finals: np.ndarray) -> dict[str, float]:
    """Spearman's rank correlation between the objective after each fraction in :data:`EARLY`
    of the steps (``histories``: trials x steps) and the final objective of the same trials."""
    steps = histories.shape[1]
    return {
        f"{fraction:g}": float(spearmanr(histories[:, max(1, round(fraction * steps)) - 1], finals).statistic)
        for fraction in EARLY
    }
