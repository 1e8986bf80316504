"""Multiple shooting: the problem cut into windows whose start states are fitted with θ,
and the start states' first guess from the recorded rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import check_int
from .._rollout import rollout
from ..engines._mjx_names import differentiate_pos, has_quaternions
from ._problem import _Problem
from ._recording import Recording, default_observe
from ._step_caps import has_qpos_qvel, mujoco_model, physical, step_size


def _shooting_problem(problem, recs, shooting, state_of, weight, x0, dtype):
    """The problem cut into windows of ``shooting`` steps, the start states' first guess
    (flat, recordings × windows after the first × state) and their scale."""
    T = problem.num_steps
    W = check_int("shooting", shooting, minimum=1)
    if W >= T:
        raise ValueError(
            f"shooting must be fewer steps than the recordings' T = {T} (one window is "
            f"single shooting: leave shooting=None), got {W}"
        )
    K = -(-T // W)
    s0_one = jax.tree_util.tree_map(lambda a: a[0], problem.data.s0)
    flat0, unravel = ravel_pytree(physical(s0_one))
    if not jnp.issubdtype(flat0.dtype, jnp.inexact):
        raise ValueError("shooting needs a state of floating-point arrays (its starts are fitted)")
    theta0 = problem.theta_of(x0)
    velocity = None
    if state_of is None:
        state_of, velocity = _default_starts(problem.step, recs[0], problem.observe.observe)
    guesses = []
    for i, rec in enumerate(recs):
        traj = rollout(problem.step, rec.s0, theta0, T, inputs=rec.inputs)
        rows = []
        for k in range(1, K):
            t = min(k * W, rec.num_steps)
            flat = ravel_pytree(physical(jax.tree_util.tree_map(lambda a, t=t: a[t], traj)))[0]
            if state_of is not None:
                row = {n: np.asarray(v)[t] for n, v in rec.signals.items()}
                if velocity is not None and "qvel" not in row:
                    row["qvel"] = velocity(rec, t)
                if all(np.all(np.isfinite(v)) for v in row.values()):
                    try:
                        flat = ravel_pytree(physical(state_of(row)))[0]
                    except Exception as err:
                        raise TypeError(
                            f"state_of failed on recordings[{i}]'s row {t}: {err}"
                        ) from err
                    if flat.shape != flat0.shape:
                        raise ValueError(
                            f"state_of gives a state of {flat.shape[0]} numbers, the step's "
                            f"has {flat0.shape[0]}"
                        )
            rows.append(np.asarray(flat, dtype=float))
        guesses.append(np.stack(rows))
    guess = np.stack(guesses)  # (R, K - 1, n)
    if not np.all(np.isfinite(guess)):
        raise ValueError("shooting: the simulation at the start θ is not finite at a window start")
    scale = np.max(np.abs(guess), axis=(0, 1))
    scale = np.where(scale > 0, scale, max(float(np.max(scale, initial=0.0)), 1.0))
    scale = np.broadcast_to(scale, guess.shape).ravel()
    d = problem.data
    wsum = sum(float(jnp.sum(jnp.where(d.mask[k], d.weights[k], 0.0))) for k in d.observed)
    nobs = sum(int(jnp.sum(d.mask[k])) for k in d.observed)
    if weight is None:
        weight = 1000.0 * wsum / max(nobs, 1)
    elif not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"continuity_weight must be finite and > 0, got {weight}")
    q = problem
    shot = _Problem(q.step, q.observe, q.params, T, q.base, q.data, W, unravel,
                    jnp.asarray(weight, dtype))  # fmt: skip
    return shot, jnp.asarray(guess.ravel(), dtype), jnp.asarray(scale, dtype)


def _velocity_from_positions(step: Any, s0: Any, signals: Mapping[str, Any]) -> Any:
    """``(rec, t) -> qvel`` for window starts when the recordings hold ``qpos`` but not
    ``qvel``: the backward difference of the recorded positions, (q_t − q_{t−1})/h
    (MuJoCo's ``mj_differentiatePos`` where a free or ball joint makes nq ≠ nv) — exact for
    semi-implicit Euler (MuJoCo's ``Euler``, which sets q_t = q_{t−1} + h·v_t), a first
    guess otherwise (the starts are fitted). ``None`` where it does not apply (no step size,
    a state that is not an MJX state or an (x, v) pair, or a previous row missing)."""
    if "qpos" not in signals or "qvel" in signals:
        return None
    h = step_size(step)
    if h is None:
        return None
    model = mujoco_model(step)
    if has_qpos_qvel(s0):
        nv = int(np.size(s0.qvel))
    elif isinstance(s0, tuple) and len(s0) == 2:
        nv = int(np.size(s0[1]))
    else:
        return None

    def velocity(rec: Recording, t: int):
        q = np.asarray(rec.signals["qpos"], dtype=float)
        if model is not None and has_quaternions(model):
            return differentiate_pos(model, h, q[t - 1], q[t])
        v = (q[t] - q[t - 1]) / h
        return v if v.size == nv else np.full(nv, np.nan)

    return velocity


def _default_starts(step: Any, rec: Recording, observe: Any) -> tuple[Any, Any]:
    """Multiple shooting's default ``(state_of, velocity)``: the recorded ``qpos`` and
    ``qvel`` as the window starts, the velocities from the positions where only ``qpos`` is
    recorded (:func:`_velocity_from_positions`); ``(None, None)`` where neither applies."""
    velocity = _velocity_from_positions(step, rec.s0, rec.signals)
    signals = dict(rec.signals, qvel=None) if velocity is not None else rec.signals
    return _default_state_of(rec.s0, observe, signals), velocity


def _default_state_of(s0: Any, observe: Any, signals: Mapping[str, Any]) -> Any:
    """``row -> state`` when the recording observes the whole state through
    :func:`default_observe` (``qpos`` and ``qvel`` of an ``(x, v)`` pair or an MJX state),
    else ``None`` (the window starts are then guessed from the simulation)."""
    if observe is not default_observe or not {"qpos", "qvel"} <= set(signals):
        return None
    if has_qpos_qvel(s0) and hasattr(s0, "_replace"):
        return lambda row: s0._replace(
            qpos=jnp.asarray(row["qpos"], s0.qpos.dtype),
            qvel=jnp.asarray(row["qvel"], s0.qvel.dtype),
        )
    if isinstance(s0, tuple) and len(s0) == 2:
        x, v = (jnp.asarray(a) for a in s0)
        return lambda row: (
            jnp.reshape(jnp.asarray(row["qpos"], x.dtype), x.shape),
            jnp.reshape(jnp.asarray(row["qvel"], v.dtype), v.shape),
        )
    return None
