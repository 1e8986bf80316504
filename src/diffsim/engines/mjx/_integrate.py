# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""Forward dynamics and the integrators: MuJoCo's ``Euler``, ``implicitfast``,
``implicit`` and ``RK4`` over MJX's pipeline, positions on the joint manifold."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import Array

from ._fields import MjxState
from ._implicit import implicit_solve, solve
from ._shim import constraint_count, mjx, next_activation

# the step is typed as Any here: this module sits below ``_step`` (which imports it), so
# naming MjxStep would close an import circle inside the package
MjxStep = Any


class Joints(NamedTuple):
    """Where each joint's coordinates sit in ``qpos`` and ``qvel``: hinge and slide joints
    (one coordinate each, gathered so they integrate at once), and the ``(qpos, qvel)``
    addresses of the free and the ball joints (which integrate a quaternion)."""

    scalar_q: tuple[int, ...]
    scalar_v: tuple[int, ...]
    free: tuple[tuple[int, int], ...]
    ball: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, mj_model: mujoco.MjModel) -> Joints:
        """The joints of ``mj_model``."""
        types = np.asarray(mj_model.jnt_type)
        qadr, vadr = np.asarray(mj_model.jnt_qposadr), np.asarray(mj_model.jnt_dofadr)
        scalar = (types == int(mujoco.mjtJoint.mjJNT_HINGE)) | (
            types == int(mujoco.mjtJoint.mjJNT_SLIDE)
        )

        def pairs(kind: int) -> tuple[tuple[int, int], ...]:
            return tuple((int(q), int(v)) for q, v, t in zip(qadr, vadr, types) if t == kind)

        return cls(
            tuple(int(q) for q in qadr[scalar]),
            tuple(int(v) for v in vadr[scalar]),
            pairs(0),
            pairs(1),
        )


def quat_integrate(q: Array, w: Array, dt: float) -> Array:
    r"""MuJoCo's ``mju_quatIntegrate``: :math:`q ⊗ (\cos(θ/2), \hat w \sin(θ/2))` with
    :math:`θ = dt\,|w|`, normalized, written as a function of :math:`|w|^2` (a Taylor
    series near 0, the "double where" elsewhere) so its derivative is right at ω = 0."""
    s = jnp.dot(w, w)
    theta2 = s * dt * dt
    small = theta2 < 1e-4
    safe = jnp.where(small, 1.0, s)
    n = jnp.sqrt(safe)
    t2 = jnp.where(small, theta2, 1.0)
    c = jnp.where(small, 1.0 - t2 / 8.0 + t2 * t2 / 384.0, jnp.cos(0.5 * dt * n))
    k = jnp.where(small, 0.5 * dt * (1.0 - t2 / 24.0 + t2 * t2 / 1920.0), jnp.sin(0.5 * dt * n) / n)
    dq = jnp.concatenate([c[None], k * w])
    out = quat_mul(q, dq)
    return out / jnp.sqrt(jnp.dot(out, out))


def quat_mul(u: Array, v: Array) -> Array:
    return jnp.stack(
        [
            u[0] * v[0] - u[1] * v[1] - u[2] * v[2] - u[3] * v[3],
            u[0] * v[1] + u[1] * v[0] + u[2] * v[3] - u[3] * v[2],
            u[0] * v[2] - u[1] * v[3] + u[2] * v[0] + u[3] * v[1],
            u[0] * v[3] + u[1] * v[2] - u[2] * v[1] + u[3] * v[0],
        ]
    )


def integrate_pos(joints: Joints, qpos: Array, qvel: Array, dt: float) -> Array:
    """MuJoCo's ``mj_integratePos``: ``qpos`` advanced by ``qvel`` over ``dt`` (hinge and
    slide joints add, free and ball joints rotate their quaternion), smooth at zero
    angular velocity."""
    out = qpos
    if joints.scalar_q:
        scalar_q, scalar_v = np.asarray(joints.scalar_q), np.asarray(joints.scalar_v)
        out = out.at[scalar_q].add(dt * qvel[scalar_v])
    for q, v in joints.free:
        out = out.at[q : q + 3].add(dt * qvel[v : v + 3])
        out = out.at[q + 3 : q + 7].set(
            quat_integrate(qpos[q + 3 : q + 7], qvel[v + 3 : v + 6], dt)
        )
    for q, v in joints.ball:
        out = out.at[q : q + 4].set(quat_integrate(qpos[q : q + 4], qvel[v : v + 3], dt))
    return out


def forward(step: MjxStep, m: mjx.Model, d: mjx.Data) -> mjx.Data:
    """MJX's forward dynamics (``mjx.forward``) with the differentiable solve."""
    d = mjx.fwd_position(m, d)
    d = mjx.sensor_pos(m, d)
    d = mjx.fwd_velocity(m, d)
    d = mjx.sensor_vel(m, d)
    d = mjx.fwd_actuation(m, d)
    d = mjx.fwd_acceleration(m, d)
    if constraint_count(d) == 0:
        return d.replace(qacc=d.qacc_smooth)
    d = implicit_solve(m, d, solve(m, d, step.iterations), step.iterations)
    return mjx.sensor_acc(m, d)


def integrate(step: MjxStep, m: mjx.Model, d: mjx.Data) -> MjxState:
    """The model's integrator from ``d`` after :func:`forward`: the next state (RK4 runs
    :func:`forward` again at its later stages)."""
    if step.integrator == "RK4":
        return rk4(step, m, d)
    if step.integrator == "implicit":
        qacc = implicit_qacc(step, m, d)
        act = next_activation(m, d, d.act_dot)
        qvel = d.qvel + step.h * qacc
        return MjxState(integrate_pos(step.joints, d.qpos, qvel, step.h), qvel, act, d.qacc)
    # MJX's own Euler (damping implicit) and implicitfast; positions integrated here
    d1 = (mjx.euler if step.integrator == "Euler" else mjx.implicit)(m, d)
    qpos = integrate_pos(step.joints, d.qpos, d1.qvel, step.h)
    return MjxState(qpos, d1.qvel, d1.act, d1.qacc_warmstart)


def implicit_qacc(step: MjxStep, m: mjx.Model, d: mjx.Data) -> Array:
    """MuJoCo's ``mjINT_IMPLICIT`` acceleration: ``(M − h ∂f/∂v)⁻¹ (f + qfrc_constraint)``
    with ``f = qfrc_smooth`` and ``∂f/∂v`` its full derivative in velocity (forward-mode
    autodiff of MJX's velocity, actuation and acceleration stages)."""

    def smooth_force(qvel):
        dv = mjx.fwd_velocity(m, d.replace(qvel=qvel))
        dv = mjx.fwd_actuation(m, dv)
        return mjx.fwd_acceleration(m, dv).qfrc_smooth

    dfdv = jax.jacfwd(smooth_force)(d.qvel)
    H = mjx.full_m(m, d) - step.h * dfdv
    return jnp.linalg.solve(H, d.qfrc_smooth + d.qfrc_constraint)


def rk4(step: MjxStep, m: mjx.Model, d0: mjx.Data) -> MjxState:
    """MuJoCo's ``mj_RungeKutta`` (classical RK4 on ``(qpos, qvel, act)``, positions on the
    joint manifold) with this adapter's forward dynamics. All four stages are one
    ``lax.scan`` whose body runs :func:`forward`, so a step traces the forward dynamics
    once. Stage i starts from ``d0`` advanced by ``h a_i`` times stage i − 1's derivatives
    (``a = 0, 1/2, 1/2, 1``: MuJoCo's tableau is diagonal)."""
    h = step.h
    a = np.array([0.0, 0.5, 0.5, 1.0])
    b = np.array([1.0, 2.0, 2.0, 1.0]) / 6.0
    zero = (jnp.zeros_like(d0.qvel), jnp.zeros_like(d0.qvel), jnp.zeros_like(d0.act))

    def stage(carry, ab):
        (kqvel, kqacc, kact_dot), sums = carry
        ai, bi = ab[0], ab[1]
        qpos = integrate_pos(step.joints, d0.qpos, ai * kqvel, h)
        qvel = d0.qvel + (ai * h) * kqacc
        act = d0.act + (ai * h) * kact_dot
        d = forward(step, m, d0.replace(qpos=qpos, qvel=qvel, act=act))
        k = (d.qvel, d.qacc, d.act_dot)
        sums = tuple(x + bi * y for x, y in zip(sums, k))
        return (k, sums), (d.qacc, d.actuator_length)

    ab = jnp.asarray(np.stack([a, b], axis=1), dtype=d0.qvel.dtype)
    (_, (vsum, asum, act_dot)), (qacc, length) = jax.lax.scan(stage, (zero, zero), ab)
    act = next_activation(m, d0.replace(actuator_length=length[0]), act_dot)
    qvel = d0.qvel + h * asum
    return MjxState(integrate_pos(step.joints, d0.qpos, vsum, h), qvel, act, qacc[0])
