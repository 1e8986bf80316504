# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""The constraint solve and its implicit-function derivative (see the package docstring)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ._shim import constraint_rows, mjx, with_constraint_solution


def _stop(tree: Any) -> Any:
    """``stop_gradient`` on the floating JAX arrays of an MJX pytree (numpy leaves, which
    MJX keeps static, are left alone)."""

    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating):
            return jax.lax.stop_gradient(x)
        return x

    return jax.tree_util.tree_map(leaf, tree)


def _active_set_solution(M, J, D, aref, qfrc_smooth, floss, active):
    """The constraint solve's linear system on a fixed active set (see the module
    docstring): ``(qacc, efc_force, qfrc_constraint)``."""
    w = D * active
    H = M + (J.T * w) @ J
    a = jnp.linalg.solve(H, qfrc_smooth + J.T @ (w * aref + floss))
    force = -w * (J @ a - aref) + floss
    return a, force, J.T @ force


@jax.custom_jvp
def _solution(M, J, D, aref, qfrc_smooth, floss, active, a_star, force_star, qfrc_star):
    """MJX's solution ``(a*, force*, qfrc*)``, differentiated as the solution of the linear
    system of its active set (:func:`_active_set_solution`): nothing is added to the
    forward pass, one ``nv × nv`` solve to each derivative."""
    return a_star, force_star, qfrc_star


@_solution.defjvp
def _solution_jvp(primals, tangents):
    *inputs, active, a_star, force_star, qfrc_star = primals
    M, J, D, aref, qfrc_smooth, floss = inputs

    def linear(M, J, D, aref, qfrc_smooth, floss):
        return _active_set_solution(M, J, D, aref, qfrc_smooth, floss, active)

    _, dout = jax.jvp(linear, (M, J, D, aref, qfrc_smooth, floss), tuple(tangents[:6]))
    return (a_star, force_star, qfrc_star), dout


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _no_derivative(inputs: tuple, iterations: int) -> tuple:
    """``inputs`` unchanged; differentiating it raises ``ValueError`` (``iterations=k``)."""
    return inputs


@_no_derivative.defjvp
def _no_derivative_jvp(iterations, primals, tangents):
    raise ValueError(
        f"derivatives with iterations={iterations} are refused: its values come from "
        f"{iterations} Newton iteration(s) of the constraint solve, and the only derivative "
        "the adapter has is that of the converged solve, a different model (gradients of "
        "one would be silently wrong for the other). Load with iterations=None (the "
        "default) to differentiate, or use a zeroth-order estimator of this model"
    )


def solve(m: mjx.Model, d: mjx.Data, iterations: int | None) -> mjx.Data:
    """MJX's constraint solve from ``d``, its inputs held constant (the derivative is the
    implicit one, :func:`implicit_solve`): to convergence (``iterations=None``) or exactly
    ``iterations`` Newton iterations, each warm-started from the last."""
    m, d = _stop(m), _stop(d)
    if iterations is None:
        return mjx.solve(m, d)
    one = m.replace(opt=m.opt.replace(iterations=1))

    def newton(_, dk):
        dk = mjx.solve(one, dk)
        return dk.replace(qacc_warmstart=dk.qacc)

    return jax.lax.fori_loop(0, iterations, newton, d)


def implicit_solve(
    m: mjx.Model, d: mjx.Data, sol: mjx.Data, iterations: int | None = None
) -> mjx.Data:
    """``d`` with MJX's constraint solution ``sol`` and its implicit-function derivative
    (see the package docstring); with ``iterations`` set, differentiating it raises."""
    rows = constraint_rows(d)
    J, D, aref = rows.J, rows.D, rows.aref
    sg = jax.lax.stop_gradient
    a_star = sg(sol.qacc)
    jaref = sg(J) @ a_star - sg(aref)
    row = np.arange(J.shape[0])
    active = (jaref < 0) | (row < rows.ne + rows.nf)
    floss = jnp.zeros_like(D)
    if rows.nf:
        f = rows.frictionloss
        r = 1.0 / sg(D + (D == 0.0) * mujoco.mjMINVAL)
        fs = sg(f)
        neg = (jaref <= -r * fs) & (fs > 0)
        pos = (jaref >= r * fs) & (fs > 0)
        active = active & ~neg & ~pos
        floss = neg * f - pos * f
    inputs = (mjx.full_m(m, d), J, D, aref, d.qfrc_smooth, floss)
    if iterations is not None:
        inputs = _no_derivative(inputs, iterations)
    qacc, force, qfrc = _solution(
        *inputs,
        active.astype(D.dtype),
        a_star,
        sg(constraint_rows(sol).force),
        sg(sol.qfrc_constraint),
    )
    return with_constraint_solution(d, qacc, qfrc, force)
