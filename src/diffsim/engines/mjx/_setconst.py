# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""MuJoCo's derived constants (what ``mj_setConst`` computes) as JAX functions of θ.

MuJoCo's compiler derives constants from the masses and inertias at ``qpos0`` and stores them
in the model: ``body_invweight0``, ``dof_invweight0`` and ``tendon_invweight0`` (which scale
the constraint solver's regularisation, i.e. how soft every contact, limit and friction-loss
row is), ``actuator_acc0`` (muscles' force scale), ``dof_M0``, ``body_subtreemass`` and
``stat.meaninertia`` / ``stat.meanmass``. A θ that edits a mass, an inertia, an armature or
a gear must carry them along, or the model stepped is not the model compiled at θ.
:func:`derived_constants` recomputes them as MuJoCo C's ``set0`` / ``setFixed`` /
``setStat`` do (``engine_setconst.c``), from MJX's own kinematics and composite-inertia
stages at ``qpos0``, differentiably in θ.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import mujoco
import numpy as np
from jaxtyping import Array

from . import _shim
from ._shim import mjx

DERIVED_FROM: tuple[str, ...] = ("body_mass", "body_inertia", "dof_armature", "actuator_gear")
"""θ fields MuJoCo's derived constants depend on: a θ naming one of them has the constants
recomputed (:func:`derived_constants`). Every other field of :data:`MODEL_FIELDS` enters no
derived constant that MJX reads (see the module docstring of :mod:`diffsim.engines.mjx`)."""


class Plan(NamedTuple):
    """The model's structure that the constants' formulas branch on (numpy, static).

    Attributes:
        ancestor: (nbody, nv) 1 where the dof moves the body (the dof's body is the body or
            one of its ancestors): the sparsity of ``mj_jacBodyCom``.
        subtree: (nbody, nbody) 1 where the second body is in the first's subtree.
        general: (nbody,) bodies whose ``body_invweight0`` is ``J M⁻¹ Jᵀ``'s (not the
            world, not welded to it, not "simple" bodies with sliders only).
        simple: (nbody,) bodies with sliders only (``body_simple == 2``), whose constants
            MuJoCo takes as ``1 / mass``.
        dof_average: (nv, nv) averaging of ``diag(M⁻¹)`` over each joint's dofs (a free
            joint's translations and rotations apart, a ball joint's three together).
        dof_simple_body: (nv,) the body of a simple body's joint's first dof, else -1.
    """

    ancestor: np.ndarray
    subtree: np.ndarray
    general: np.ndarray
    simple: np.ndarray
    dof_average: np.ndarray
    dof_simple_body: np.ndarray

    @classmethod
    def of(cls, mj: mujoco.MjModel) -> Plan:
        """The plan of ``mj`` (its tree, joints and body kinds)."""
        nbody, nv = mj.nbody, mj.nv
        parent = np.asarray(mj.body_parentid)
        subtree = np.eye(nbody)
        for b in range(nbody - 1, 0, -1):  # children follow their parents in MuJoCo
            subtree[parent[b]] = np.maximum(subtree[parent[b]], subtree[b])
        dof_body = np.asarray(mj.dof_bodyid)
        ancestor = subtree.T[:, dof_body]  # ancestor[b, i]: dof i's body has b below it
        simple = (np.asarray(mj.body_simple) == 2) & (np.arange(nbody) > 0)
        general = (np.arange(nbody) > 0) & (np.asarray(mj.body_weldid) != 0) & ~simple
        average = np.zeros((nv, nv))
        simple_body = -np.ones(nv, dtype=int)
        for j in range(mj.njnt):
            adr, body = int(mj.jnt_dofadr[j]), int(mj.jnt_bodyid[j])
            kind = int(mj.jnt_type[j])
            if simple[body]:
                simple_body[adr] = body
            elif kind == mujoco.mjtJoint.mjJNT_FREE:
                average[adr : adr + 3, adr : adr + 3] = 1 / 3
                average[adr + 3 : adr + 6, adr + 3 : adr + 6] = 1 / 3
            elif kind == mujoco.mjtJoint.mjJNT_BALL:
                average[adr : adr + 3, adr : adr + 3] = 1 / 3
            else:
                average[adr, adr] = 1.0
        return cls(ancestor, subtree, general, simple, average, simple_body)


class Constants(NamedTuple):
    """The derived constants :func:`derived_constants` computes (MJX model field names)."""

    body_subtreemass: Array
    body_invweight0: Array
    dof_invweight0: Array
    dof_M0: Array
    tendon_invweight0: Array
    actuator_acc0: Array
    meaninertia: Array
    meanmass: Array


def derived_constants(plan: Plan, m: mjx.Model, template: mjx.Data) -> Constants:
    """MuJoCo's derived constants of the MJX model ``m`` (whose masses, inertias, armature
    and gears may be traced), computed at ``qpos0`` as ``mj_setConst`` does.

    ``template`` is MJX ``Data`` of the model (any state: only its shapes are used).
    """
    d = template.replace(qpos=jnp.asarray(m.qpos0))
    d = mjx.kinematics(m, d)
    d = mjx.com_pos(m, d)
    d = mjx.tendon(m, d)
    d = mjx.crb(m, d)
    d = mjx.tendon_armature(m, d)
    d = mjx.transmission(m, d)
    M = mjx.full_m(m, d)
    # M⁻¹ through a Cholesky factor (M is symmetric positive definite), as mj_solveM
    chol = jnp.linalg.cholesky(M)

    def solve(rhs: Array) -> Array:  # M⁻¹ rhs, rhs (nv, k)
        y = jnp.linalg.solve(chol, rhs)
        return jnp.linalg.solve(chol.T, y)

    mass = jnp.asarray(m.body_mass)
    inv_mass = 1.0 / jnp.maximum(mujoco.mjMINVAL, mass)
    nbody, nv = plan.ancestor.shape

    # body_invweight0: the mean diagonal of J M⁻¹ Jᵀ, J the Jacobian of the body's centre of
    # mass (mj_jacBodyCom), translational and rotational parts apart
    offset = d.xipos - d.subtree_com[np.asarray(m.body_rootid)]  # (nbody, 3)
    ang, lin = d.cdof[:, :3], d.cdof[:, 3:]
    jacp = lin[None] + jnp.cross(ang[None], offset[:, None, :])  # (nbody, nv, 3)
    jacp = jacp * plan.ancestor[..., None]
    jacr = ang[None] * plan.ancestor[..., None]
    jac = jnp.concatenate([jacp, jacr], axis=-1)  # (nbody, nv, 6)
    flat = jac.transpose(1, 0, 2).reshape(nv, nbody * 6)
    diag = jnp.sum(flat * solve(flat), axis=0).reshape(nbody, 6)
    general = jnp.stack([diag[:, :3].mean(-1), diag[:, 3:].mean(-1)], axis=-1)
    simple = jnp.stack([inv_mass, jnp.zeros_like(inv_mass)], axis=-1)
    body_invweight0 = jnp.where(
        plan.general[:, None], general, jnp.where(plan.simple[:, None], simple, 0.0)
    )

    # dof_invweight0: diag(M⁻¹) averaged over each joint's dofs; sliders of simple bodies 1/m
    m_inv_diag = jnp.diagonal(solve(jnp.eye(nv, dtype=M.dtype)))
    dof_invweight0 = jnp.asarray(plan.dof_average) @ m_inv_diag
    dof_invweight0 = jnp.where(
        plan.dof_simple_body >= 0, inv_mass[np.maximum(plan.dof_simple_body, 0)], dof_invweight0
    )

    # tendon_invweight0: J M⁻¹ Jᵀ per tendon; actuator_acc0: |M⁻¹ moment| per actuator
    ten_j = _shim.tendon_jacobian(d)  # (ntendon, nv)
    tendon_invweight0 = jnp.sum(ten_j * solve(ten_j.T).T, axis=-1)
    moment = _shim.actuator_moment(d)  # (nu, nv)
    actuator_acc0 = jnp.linalg.norm(solve(moment.T).T, axis=-1) if moment.shape[0] else None

    diag_m = jnp.diagonal(M)
    return Constants(
        body_subtreemass=jnp.asarray(plan.subtree) @ mass,
        body_invweight0=body_invweight0,
        dof_invweight0=dof_invweight0,
        dof_M0=diag_m,
        tendon_invweight0=tendon_invweight0,
        actuator_acc0=(
            actuator_acc0 if actuator_acc0 is not None else jnp.asarray(m.actuator_acc0)
        ),
        meaninertia=jnp.mean(diag_m),
        meanmass=jnp.mean(mass[1:]) if nbody > 1 else jnp.asarray(m.stat.meanmass),
    )


def with_derived_constants(plan: Plan, m: mjx.Model, template: mjx.Data) -> mjx.Model:
    """``m`` with its derived constants recomputed from its (possibly traced) fields."""
    c = derived_constants(plan, m, template)
    m = m.replace(
        body_subtreemass=c.body_subtreemass,
        body_invweight0=c.body_invweight0,
        dof_invweight0=c.dof_invweight0,
        dof_M0=c.dof_M0,
        tendon_invweight0=c.tendon_invweight0,
        actuator_acc0=c.actuator_acc0,
    )
    return m.replace(stat=m.stat.replace(meaninertia=c.meaninertia, meanmass=c.meanmass))
