# pyright: reportAttributeAccessIssue=false
# (MJX's private modules and its Data's ``_impl`` are untyped for pyright)
"""Every use of MJX's private code, one named function each.

The adapter needs four things MJX keeps private: the constraint rows of its solve
(``Data._impl.efc_*``, the solver's inputs the implicit derivative is built from), writing
the constraint force back into ``Data._impl``, ``mjx._src.forward._next_activation``
(MuJoCo's activation update, which the implicit and RK4 integrators apply themselves), and
the tendon Jacobian and actuator moment arms (``Data._impl.ten_J``, ``actuator_moment``),
which MuJoCo's derived constants are computed from (:mod:`._setconst`).
Nothing else in :mod:`diffsim.engines.mjx` touches ``mujoco.mjx._src`` or ``._impl``;
``tests/test_mjx_shim.py`` pins the MuJoCo version this was written against
(:data:`SUPPORTED_MUJOCO`) and checks that every private name below exists.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, NamedTuple, cast

import jax.numpy as jnp
from jaxtyping import Array

# MJX's optional Warp backend prints "Failed to import warp: ..." when importing it fails
# (it is not needed here: the adapter runs MJX's JAX implementation); keep imports quiet
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    from mujoco import mjx
    from mujoco.mjx._src import forward as _mjx_forward

SUPPORTED_MUJOCO = "3.17.0"
"""The MuJoCo (and MJX) release the private accesses below are written against (the
``diffsim-jax[mjx]`` extra pins it)."""

PRIVATE_FORWARD = ("_next_activation",)
"""Names this module uses from ``mujoco.mjx._src.forward``."""

PRIVATE_DATA = (
    "efc_J", "efc_D", "efc_aref", "efc_frictionloss", "efc_force", "ne", "nf", "ten_J",
    "actuator_moment",
)  # fmt: skip
"""Fields this module reads from (or writes to) MJX ``Data._impl``."""


class ConstraintRows(NamedTuple):
    """The constraint solve's rows in MJX ``Data`` (``d._impl``): Jacobian ``J``
    (nefc, nv), regularised inverse mass ``D``, reference accelerations ``aref``, the
    numbers of equality (``ne``) and friction-loss (``nf``) rows, which come first, the
    friction-loss bounds and the solved constraint forces."""

    J: Array
    D: Array
    aref: Array
    ne: int
    nf: int
    frictionloss: Array
    force: Array


def constraint_rows(d: mjx.Data) -> ConstraintRows:
    """The constraint rows of ``d`` (after ``fwd_acceleration``, or the solve for ``force``)."""
    impl: Any = d._impl
    return ConstraintRows(
        impl.efc_J, impl.efc_D, impl.efc_aref, impl.ne, impl.nf, impl.efc_frictionloss,
        impl.efc_force,
    )  # fmt: skip


def constraint_count(d: mjx.Data) -> int:
    """How many constraint rows ``d`` has (0: nothing to solve)."""
    return int(d._impl.efc_J.shape[0])


def with_constraint_solution(d: mjx.Data, qacc: Array, qfrc: Array, force: Array) -> mjx.Data:
    """``d`` holding the solve's acceleration, constraint force in joint space and per-row
    constraint forces (``d._impl.efc_force``)."""
    out = d.tree_replace({"qacc": qacc, "qfrc_constraint": qfrc, "_impl.efc_force": force})
    return cast(mjx.Data, out)


def tendon_jacobian(d: mjx.Data) -> Array:
    """The tendons' Jacobian (ntendon, nv) in ``d`` after ``mjx.tendon``."""
    return jnp.reshape(d._impl.ten_J, (-1, d.qvel.shape[0]))


def actuator_moment(d: mjx.Data) -> Array:
    """The actuators' moment arms (nu, nv) in ``d`` after ``mjx.transmission``."""
    return jnp.reshape(d._impl.actuator_moment, (-1, d.qvel.shape[0]))


def next_activation(m: mjx.Model, d: mjx.Data, act_dot: Array) -> Array:
    """MuJoCo's activation update over one step (``mjx._src.forward._next_activation``)."""
    return _mjx_forward._next_activation(m, d, act_dot)
