# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""What a model costs MJX before MJX sees it: contact pairs, constraint rows, memory.

MJX sizes every array statically: each geom pair that may collide gets its contact slots
and constraint rows whether or not it touches, and the constraint Jacobian ``efc_J`` is a
dense ``nefc × nv`` array (per state; a batch or a differentiated rollout holds many).
Building that model (``mjx.put_model``, which enumerates the pairs) grows with the square
of the geom count — 2,000 free spheres take minutes to load and then ask for ~700 GiB — so
:func:`load` estimates from MuJoCo C's compiled model, in NumPy, and refuses a model whose
one state cannot fit, with the estimate.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import mujoco
import numpy as np


class SizeEstimate(NamedTuple):
    """A lower bound on what one MJX state of a model holds.

    Attributes:
        pairs: geom pairs that may collide (contype/conaffinity, not on one weld body, not
            parent and child unless the model disables that filter, plus explicit
            ``<pair>`` s, less ``<exclude>`` s).
        rows: constraint rows: one contact per pair, ``2 (condim - 1)`` rows each (a
            pyramidal cone; 1 for condim 1), plus the equality rows. MJX gives some pairs
            (box, mesh) several contacts, so this is a lower bound.
        nbytes: the dense constraint Jacobian's bytes, ``rows × nv × 8``.
    """

    pairs: int
    rows: int
    nbytes: int


def _rows_per_contact(condim: np.ndarray) -> np.ndarray:
    return np.where(condim <= 1, 1, 2 * (condim - 1))


def estimate(m: mujoco.MjModel) -> SizeEstimate:
    """The :class:`SizeEstimate` of ``m`` (vectorised over the geom pairs: O(ngeom²) bytes).

    Example:
        >>> import mujoco
        >>> from diffsim.engines.mjx._size import estimate
        >>> xml = ("<mujoco><worldbody><geom type='plane' size='1 1 .1'/>" + "".join(
        ...     f"<body pos='{i} 0 1'><freejoint/><geom size='.1'/></body>" for i in range(3))
        ...     + "</worldbody></mujoco>")
        >>> estimate(mujoco.MjModel.from_xml_string(xml))  # 3 on the plane + 3 between them
        SizeEstimate(pairs=6, rows=24, nbytes=3456)
    """
    n = int(m.ngeom)
    rows, pairs = 0, 0
    if n > 1 and not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        i, j = np.triu_indices(n, 1)
        ct, ca = m.geom_contype, m.geom_conaffinity
        ok = ((ct[i] & ca[j]) | (ct[j] & ca[i])) != 0
        weld = m.body_weldid[m.geom_bodyid]
        ok &= weld[i] != weld[j]
        if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
            parent = m.body_weldid[m.body_parentid[weld]]
            child = (
                ((parent[i] == weld[j]) | (parent[j] == weld[i])) & (weld[i] > 0) & (weld[j] > 0)
            )
            ok &= ~child
        condim = np.maximum(m.geom_condim[i], m.geom_condim[j])[ok]
        pairs = int(ok.sum()) + int(m.npair) - int(m.nexclude)
        rows = int(_rows_per_contact(condim).sum()) + int(_rows_per_contact(m.pair_dim).sum())
    rows = max(rows, 0) + int(m.neq)  # an equality has 1 to 6 rows: 1, a lower bound
    return SizeEstimate(max(pairs, 0), rows, rows * int(m.nv) * 8)


def physical_memory() -> int:
    """This machine's physical memory in bytes (0 where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


def check_size(m: mujoco.MjModel, max_bytes: int | None, what: str) -> SizeEstimate:
    """``m``'s :class:`SizeEstimate`; ``ValueError`` with it when one state's constraint
    Jacobian exceeds ``max_bytes`` (``None``: half the physical memory)."""
    est = estimate(m)
    limit = physical_memory() // 2 if max_bytes is None else max_bytes
    if limit and est.nbytes > limit:
        raise ValueError(
            f"{what} is too large for MJX here: at least {est.nbytes / 2**30:.3g} GiB for one "
            f"state's constraint Jacobian ({est.pairs:,} geom pairs that may collide, "
            f">= {est.rows:,} constraint rows × nv = {m.nv:,} × 8 bytes), over the limit of "
            f"{limit / 2**30:.3g} GiB (max_bytes; default half this machine's memory); "
            "reduce the colliding geoms (contype/conaffinity, <exclude>) or use MuJoCo C"
        )
    return est
