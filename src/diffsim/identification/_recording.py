"""A recorded trajectory (:class:`Recording`), the signals a state shows by default, its
checks against a step, and a synthetic recording made by simulation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_int
from .._rollout import rollout
from ._step_caps import has_qpos_qvel, step_size

Signals = dict[str, Any]


def default_observe(state: Any) -> Signals:
    """The signals a state shows by default: ``{"qpos", "qvel"}`` of an MJX state, or
    positions and velocities of an ``(x, v)`` state (each raveled to a vector).

    Example:
        >>> from diffsim.identification import default_observe
        >>> {k: v.tolist() for k, v in default_observe((1.0, -2.0)).items()}
        {'qpos': [1.0], 'qvel': [-2.0]}
    """
    if has_qpos_qvel(state):
        return {"qpos": state.qpos, "qvel": state.qvel}
    if isinstance(state, tuple) and len(state) == 2:
        return {"qpos": jnp.ravel(jnp.asarray(state[0])), "qvel": jnp.ravel(jnp.asarray(state[1]))}
    raise TypeError(
        "the state is neither an MJX state nor an (x, v) pair: pass observe=state -> "
        "{signal: vector}"
    )


class Recording(eqx.Module):
    """One recorded trajectory: where it started, the controls, what was observed.

    Attributes:
        s0: the initial state (the step's state pytree), taken as known.
        signals: ``{name: (T + 1, k) array}``, row t observed at step t (row 0 at ``s0``,
            not fitted); NaN marks a missing sample.
        inputs: per-step controls, leading axis T (``u_t`` drives step t → t+1), or
            ``None``.
        weights: ``{name: scalar, (k,) or (T + 1, k)}`` multiplying that signal's residuals
            (1/σ of its noise), default 1.
        time: the sample times (T + 1,), s, or ``None``; checked against the step's ``h``.

    Example:
        >>> import numpy as np
        >>> from diffsim import Recording
        >>> rec = Recording((0.0, 1.0), {"qpos": np.array([[0.0], [0.1], [np.nan]])})
        >>> rec.num_steps, rec.num_samples
        (2, 1)
    """

    s0: Any
    signals: dict[str, Any]
    inputs: Any = None
    weights: dict[str, Any] | None = None
    time: Any = None

    def __check_init__(self) -> None:
        if not isinstance(self.signals, Mapping) or not self.signals:
            raise ValueError(
                f"signals must be a non-empty dict {{name: (T + 1, k) array}}, got {self.signals!r}"
            )
        rows = {name: np.shape(v)[0] if np.ndim(v) else None for name, v in self.signals.items()}
        for name, n in rows.items():
            if n is None or n < 1:
                raise ValueError(
                    f"signals[{name!r}] must have a leading time axis of T + 1 >= 1 rows, got "
                    f"shape {np.shape(self.signals[name])}"
                )
        if len(set(rows.values())) > 1:
            raise ValueError(f"signals must all have T + 1 rows, got {rows}")

    @property
    def num_steps(self) -> int:
        """T: the steps the recording spans (its signals' rows minus one)."""
        return int(np.shape(next(iter(self.signals.values())))[0]) - 1

    @property
    def num_samples(self) -> int:
        """Observed (non-missing) samples after row 0: the residuals this recording gives."""
        return int(sum(np.sum(np.isfinite(np.asarray(v)[1:])) for v in self.signals.values()))


def check_recording(i: int, rec: Recording, h: float | None) -> None:
    where = f"recordings[{i}]"
    if not isinstance(rec, Recording):
        raise TypeError(f"{where} must be a diffsim.Recording, got {type(rec).__name__}")
    if not rec.signals:
        raise ValueError(f"{where}.signals is empty: record at least one signal")
    lengths = {k: np.shape(v) for k, v in rec.signals.items()}
    for k, shp in lengths.items():
        if len(shp) != 2 or shp[0] < 2:
            raise ValueError(
                f"{where}.signals[{k!r}] must have shape (T + 1, k) with T >= 1, got {shp}"
            )
        arr = np.asarray(rec.signals[k], dtype=float)
        if np.any(np.isinf(arr)):
            raise ValueError(f"{where}.signals[{k!r}] holds inf: use NaN for a missing sample")
    rows = {shp[0] for shp in lengths.values()}
    if len(rows) != 1:
        raise ValueError(f"{where}: signals must have the same number of rows, got {lengths}")
    T = rows.pop() - 1
    for leaf in jax.tree_util.tree_leaves(rec.inputs):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != T:
            raise ValueError(
                f"{where}.inputs must have leading axis T = {T} (one control per step), got "
                f"a leaf of shape {np.shape(leaf)}"
            )
        if not np.all(np.isfinite(np.asarray(leaf, dtype=float))):
            raise ValueError(f"{where}.inputs must be finite")
    for leaf in jax.tree_util.tree_leaves(rec.s0):
        if not np.all(np.isfinite(np.asarray(leaf, dtype=float))):
            raise ValueError(f"{where}.s0 must be finite")
    for k, w in (rec.weights or {}).items():
        if k not in rec.signals:
            raise ValueError(f"{where}.weights names {k!r}, not a signal: {', '.join(rec.signals)}")
        w = np.asarray(w, dtype=float)
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(f"{where}.weights[{k!r}] must be finite and >= 0")
    if rec.time is not None:
        t = np.asarray(rec.time, dtype=float)
        if t.shape != (T + 1,) or not np.all(np.isfinite(t)):
            raise ValueError(f"{where}.time must be finite with shape ({T + 1},), got {t.shape}")
        if h is not None and not np.allclose(np.diff(t), h, rtol=1e-6, atol=1e-9):
            raise ValueError(
                f"{where}.time is not sampled at the step's h = {h:g} s (spacing "
                f"{np.diff(t).min():g} to {np.diff(t).max():g} s): record every step or "
                f"build the step with that h"
            )


def simulate_recording(
    step: Callable[..., Any],
    s0: Any,
    theta: Any,
    num_steps: int,
    *,
    inputs: Any = None,
    observe: Callable[[Any], Signals] = default_observe,
    noise: float | Mapping[str, float] = 0.0,
    key: Any = None,
) -> Recording:
    """A synthetic recording: roll ``step`` out at the true ``theta`` and observe it, with
    Gaussian noise of standard deviation ``noise`` (per signal if a dict) on rows 1..T.

    Example:
        >>> from diffsim.identification import simulate_recording
        >>> from diffsim.systems import free_particle
        >>> sys = free_particle(h=0.5, a=0.0, v0=2.0)
        >>> rec = simulate_recording(sys.step, sys.s0, sys.theta, 2)
        >>> rec.signals["qpos"].ravel().tolist()
        [0.0, 1.0, 2.0]
    """
    num_steps = check_int("num_steps", num_steps, minimum=1)
    traj = rollout(step, s0, theta, num_steps, inputs=inputs)
    signals = {
        k: np.asarray(v).reshape(num_steps + 1, -1) for k, v in jax.vmap(observe)(traj).items()
    }
    for k, v in signals.items():  # a rollout that leaves the finite numbers is no recording
        bad = np.flatnonzero(~np.all(np.isfinite(v), axis=1))
        if bad.size:
            raise ValueError(
                f"simulate_recording: the rollout at theta is NaN or inf from step "
                f"{int(bad[0])} of {num_steps} (signal {k!r}); check theta's physical "
                "settings (a mass or stiffness <= 0, a time step too large for them)"
            )
    sigmas = noise if isinstance(noise, Mapping) else dict.fromkeys(signals, noise)
    for k, sd in sigmas.items():
        if k not in signals:
            raise ValueError(f"noise names {k!r}, not a signal: {', '.join(signals)}")
        if not (math.isfinite(sd) and sd >= 0):
            raise ValueError(f"noise[{k!r}] must be a finite standard deviation >= 0, got {sd}")
    if any(sd > 0 for sd in sigmas.values()):
        if key is None:
            raise ValueError("key must be a jax.random key when noise > 0")
        for k, sub in zip(sorted(sigmas), jax.random.split(key, len(sigmas))):
            eps = np.array(jax.random.normal(sub, signals[k].shape, signals[k].dtype))
            eps[0] = 0.0  # the initial state is known
            signals[k] = signals[k] + sigmas[k] * eps
    h = step_size(step)
    t = None if h is None else h * np.arange(num_steps + 1)
    return Recording(s0, signals, inputs, None, t)
