"""Node roles: participation coefficient c and within-module degree z (bipartite ``czvalues`` conventions).

Olesen, Bascompte, Dupont & Jordano 2007 (PNAS 104:19891), after Guimerà & Amaral 2005 (Nature 433:895).
For a node ``i`` of one type (rows or columns) in module ``s``:

* ``c_i = 1 - sum_t (k_it / k_i)**2`` where ``k_it`` counts i's links (weights if ``weighted``) to partners
  (nodes of the other type) in module ``t``. NaN for a node without links (0/0); 0 for a node of degree 1.
* ``z_i = (k_is - mean(k_.s)) / sd(k_.s)`` over the nodes **of the same type** in module ``s``, with ``sd``
  using ``n - 1`` (R ``sd``). As bipartite does: a 0/0 (all equal, sd 0) becomes 0, while a node that is
  the only one of its type in its module gets NaN (R's ``NA``: the sd of one value is undefined).

``bctpy``'s ``module_degree_zscore`` pools both node types and uses ``n``; it does not give these values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Olesen et al. 2007: c > 0.62 marks connectors and z > 2.5 hubs (bipartite's help page quotes 2.6).
C_CRIT = 0.62
Z_CRIT = 2.5


@dataclass(frozen=True)
class CZ:
    """c and z for the nodes of one level (``rows`` or ``cols``), in matrix order."""

    c: NDArray[np.float64]
    z: NDArray[np.float64]


def czvalues(
    B: ArrayLike,
    row_labels: Sequence[Any],
    col_labels: Sequence[Any],
    level: str = "rows",
    weighted: bool = False,
) -> CZ:
    """Participation c and within-module z of every row (``level="rows"``) or column (``"cols"``).

    Args:
        B: Biadjacency matrix (rows × columns).
        row_labels: Module of each row.
        col_labels: Module of each column.
        level: ``rows`` (bipartite's ``"lower"``) or ``cols`` (``"higher"``).
        weighted: Use weights; default binarises (non-zero = link), as ``czvalues(weighted = FALSE)``.
    """
    W = np.asarray(B, dtype=float)
    if not weighted:
        W = (W != 0).astype(float)
    if level == "cols":
        W, row_labels, col_labels = W.T, col_labels, row_labels
    elif level != "rows":
        raise ValueError(f"level must be 'rows' or 'cols', not {level!r}")
    own = np.asarray([str(x) for x in row_labels], dtype=object)
    partner = np.asarray([str(x) for x in col_labels], dtype=object)
    modules = sorted(set(own) | set(partner))
    # k_it: links of each node to partners in each module.
    k_it = np.stack([W[:, partner == t].sum(axis=1) for t in modules], axis=1)
    k = W.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = 1.0 - np.sum((k_it / k[:, None]) ** 2, axis=1)
    k_is = np.array([k_it[i, modules.index(own[i])] for i in range(len(own))])
    z = np.empty(len(own))
    for s in set(own):
        members = own == s
        vals = k_is[members]
        if vals.size < 2:
            z[members] = np.nan
            continue
        sd = vals.std(ddof=1)
        z[members] = 0.0 if sd == 0 else (vals - vals.mean()) / sd
    return CZ(c=c, z=z)


def role(c: float, z: float, c_crit: float = C_CRIT, z_crit: float = Z_CRIT) -> str:
    """Olesen et al. 2007 role: ``peripheral``, ``connector`` (c > c_crit), ``module hub`` (z > z_crit) or
    ``network hub`` (both). NaN values count as below the thresholds."""
    hub = bool(np.isfinite(z) and z > z_crit)
    conn = bool(np.isfinite(c) and c > c_crit)
    if hub and conn:
        return "network hub"
    if hub:
        return "module hub"
    return "connector" if conn else "peripheral"
