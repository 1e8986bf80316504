# pyright: reportAttributeAccessIssue=false
# (mujoco, imported for element names, is a compiled module without type stubs)
r"""System identification: fit θ so that a simulation reproduces recorded motion.

Given recorded trajectories — each an initial state :math:`s_0`, controls :math:`u_t` and
observed signals :math:`y_t` (positions, velocities, any function of the state) — and a
diffsim step :math:`s_{t+1} = f(s_t, θ, u_t)`, :func:`identify` solves the nonlinear least
squares problem

.. math:: \hat θ = \arg\min_θ \tfrac12 \sum_{r,t,i} \big(w_{rti}\,(g_i(s^r_t(θ)) -
          y^r_{ti})\big)^2

over a chosen subset of θ, with the **exact** Jacobian of the residuals through the rollout
(forward-mode autodiff through :func:`diffsim.rollout`: one tangent per fitted parameter,
through the contact models and MJX's constraint solver alike). The solver is Optimistix's
Levenberg–Marquardt, driven step by step inside one ``lax.while_loop`` so that the
iterates are kept. All recordings run as one ``vmap`` of the rollout.

**Bounds by reparametrisation, not clipping.** A parameter with a lower bound is
:math:`θ = lo + e^z`, with an upper bound :math:`θ = hi - e^z`, with both
:math:`θ = lo + (hi - lo)\,σ(z)`; an unbounded one :math:`θ = θ_0 + |θ_0| z`. The solver
works on z, so θ stays strictly inside its bounds.

**Uncertainty.** At :math:`\hat θ`, with J the Jacobian of the weighted residuals with
respect to the fitted parameters, N observed (non-missing) samples and p parameters,

.. math:: \hat σ^2 = \frac{\lVert r \rVert^2}{N - p},\qquad
          \mathrm{Cov}(\hat θ) = \hat σ^2 (J^\top J)^{-1},\qquad
          \hat θ_j \pm t_{0.975,\,N-p}\,\sqrt{\mathrm{Cov}_{jj}},

the Gauss–Newton (linearised) covariance: the 95 % intervals are exact for a model linear
in θ with independent Gaussian noise of equal variance after weighting (so a weight should
be 1/σ of its signal's noise), and asymptotically otherwise.

**Identifiability.** The singular values of the column-normalised Jacobian
:math:`J D` (:math:`D_{jj} = 1/\lVert J_{:j} \rVert`) measure how well the data pin each
direction of θ. A relative singular value below ``rank_rtol`` is a direction the data do
not see: before fitting, :func:`identify` raises :class:`NotIdentifiableError` naming the
parameters in it (at the start point the fit could not move along it); at the estimate the
result lists them in ``unidentifiable`` and reports their intervals as infinite.

**Missing samples.** NaN in an observed signal means "not measured": that sample gives no
residual and is not counted in N.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ._checks import check_int, is_concrete
from ._rollout import rollout

Signals = dict[str, Any]

CONFIDENCE = 0.95
"""The level of :attr:`IdentifyResult.interval_low` / ``interval_high``."""

TRUST = ("act", "report", "off")
"""What :func:`identify` may do about the doctor's check of the exact Jacobian."""

FILE_SIGNALS = ("qpos", "qvel", "sensordata")
"""Signals a recording file may hold (besides ``time`` and ``ctrl``), MuJoCo's names."""


class NotIdentifiableError(ValueError):
    """The data do not determine some of the fitted parameters (a rank-deficient JᵀJ).

    Attributes:
        parameters: the names of the parameters in the directions the data do not see.
        singular_values: the relative singular values of the column-normalised Jacobian.

    Example:
        >>> from diffsim import NotIdentifiableError
        >>> err = NotIdentifiableError("m and k only enter as k/m", ("m", "k"), (1.0, 0.0))
        >>> isinstance(err, ValueError), err.parameters
        (True, ('m', 'k'))
    """

    def __init__(self, message: str, parameters: Sequence[str], singular_values: Sequence[float]):
        super().__init__(message)
        self.parameters = tuple(parameters)
        self.singular_values = tuple(float(s) for s in singular_values)


# --- parameters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    """One fitted entry of θ: ``theta[field][index]``, its start and its bounds.

    Attributes:
        field: the key of θ (a dict) that holds it, e.g. ``"k"`` or ``"body_mass"``.
        index: the element of ``theta[field]`` (``()`` for a scalar, an int or a tuple).
        start: the starting value (default: the value in θ).
        lower, upper: bounds (default unbounded); the start must lie strictly inside.
        name: the name results and errors use (default ``field`` or ``field[index]``).

    Example:
        >>> from diffsim import Parameter
        >>> Parameter("k", start=20.0, lower=0.0).label, Parameter("m", 1).label
        ('k', 'm[1]')
    """

    field: str
    index: int | tuple[int, ...] = ()
    start: float | None = None
    lower: float = -math.inf
    upper: float = math.inf
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name is not None:
            return self.name
        idx = self.index if isinstance(self.index, tuple) else (self.index,)
        return self.field if not idx else f"{self.field}[{','.join(map(str, idx))}]"

    @property
    def kind(self) -> str:
        lo, hi = math.isfinite(self.lower), math.isfinite(self.upper)
        return {(False, False): "free", (True, False): "lower", (False, True): "upper"}.get(
            (lo, hi), "both"
        )


_MJ_OBJECTS = {"body": "mjOBJ_BODY", "geom": "mjOBJ_GEOM", "jnt": "mjOBJ_JOINT",
               "actuator": "mjOBJ_ACTUATOR", "dof": "mjOBJ_JOINT"}  # fmt: skip


def parse_parameters(
    spec: str | Sequence[str],
    theta: Mapping[str, Any],
    *,
    model: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: Mapping[str, float] | None = None,
) -> tuple[Parameter, ...]:
    """Parameters from names: ``"k"``, ``"m[1]"``, ``"geom_friction[0,0]"`` or, for a MuJoCo
    model, ``"body_mass:box"`` (field, then the element's name; a 2-D field's column 0).

    Args:
        spec: comma-separated names, or a sequence of them.
        theta: the θ they index (a dict of arrays: sets the fields and shapes accepted).
        model: a ``mujoco.MjModel`` to resolve ``field:element`` names (bodies for
            ``body_*``, geoms for ``geom_*``, joints for ``jnt_*`` and ``dof_*``,
            actuators for ``actuator_*``).
        bounds: ``{name: (lower, upper)}`` (``±inf`` for none).
        start: ``{name: value}`` starting values.

    Raises:
        ValueError: an empty spec, an unknown field (the message lists θ's), an element
            name the model lacks (listed), an index outside the field's shape, bounds or
            starts naming no parsed parameter.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import parse_parameters
        >>> theta = {"m": jnp.array([1.0, 1.5]), "k": jnp.array(20.0)}
        >>> [p.label for p in parse_parameters("m[1], k", theta, bounds={"k": (0, 100)})]
        ['m[1]', 'k']
    """
    names = [
        s.strip() for s in (re.split(r",(?![^\[]*\])", spec) if isinstance(spec, str) else spec)
    ]
    names = [s for s in names if s]
    if not names:
        raise ValueError("the parameters to fit must name at least one entry of theta, got none")
    if not isinstance(theta, Mapping):
        raise ValueError(f"theta must be a dict of arrays, got {type(theta).__name__}")
    bounds, start = dict(bounds or {}), dict(start or {})
    out = []
    for text in names:
        m = re.fullmatch(r"([A-Za-z_]\w*)(?::([^\[\]]+))?(?:\[([\d,\s]+)\])?", text)
        if m is None:
            raise ValueError(
                f"parameter {text!r} must read 'field', 'field[i]', 'field[i,j]' or "
                f"'field:element' (a MuJoCo element's name)"
            )
        fld, element, index_text = m.group(1), m.group(2), m.group(3)
        if fld not in theta:
            raise ValueError(
                f"parameter {text!r}: theta has no field {fld!r}; fields: {', '.join(theta)}"
            )
        shape = tuple(np.shape(theta[fld]))
        index: tuple[int, ...] = ()
        if element is not None:
            index = (_element_id(model, fld, element.strip(), text),)
        if index_text is not None:
            index = index + tuple(int(i) for i in index_text.split(","))
        if len(index) < len(shape):  # a row of a 2-D field: its first column
            if element is None and index_text is None and shape == (1,):
                index = (0,)
            elif element is None and index_text is None:
                raise ValueError(
                    f"parameter {text!r}: theta[{fld!r}] has shape {shape}; name one element, "
                    f"e.g. '{fld}[{','.join('0' * len(shape))}]'"
                )
            else:
                index = index + (0,) * (len(shape) - len(index))
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            raise ValueError(
                f"parameter {text!r}: index {index} is outside theta[{fld!r}]'s shape {shape}"
            )
        lo, hi = bounds.pop(text, (-math.inf, math.inf))
        out.append(Parameter(fld, index, start.pop(text, None), float(lo), float(hi), name=text))
    for what, left in (("bounds", bounds), ("start", start)):
        if left:
            raise ValueError(
                f"{what} name {', '.join(map(repr, left))}, which are not fitted; fitted: "
                f"{', '.join(p.label for p in out)}"
            )
    return tuple(out)


def _element_id(model: Any, fld: str, element: str, text: str) -> int:
    if model is None:
        raise ValueError(f"parameter {text!r} names an element: pass the MuJoCo model")
    import mujoco  # only with a model  # pyright: ignore[reportMissingImports]

    prefix = fld.split("_", 1)[0]
    if prefix not in _MJ_OBJECTS:
        raise ValueError(f"parameter {text!r}: field {fld!r} has no named elements; use {fld}[i]")
    obj = getattr(mujoco.mjtObj, _MJ_OBJECTS[prefix])
    i = mujoco.mj_name2id(model, obj, element)
    if i < 0:
        count = {"body": model.nbody, "geom": model.ngeom, "jnt": model.njnt,
                 "dof": model.njnt, "actuator": model.nu}[prefix]  # fmt: skip
        known = [mujoco.mj_id2name(model, obj, k) for k in range(count)]
        raise ValueError(
            f"parameter {text!r}: the model has no {prefix} named {element!r}; "
            f"{prefix}s: {', '.join(k for k in known if k) or 'none named'}"
        )
    if prefix == "dof":
        return int(model.jnt_dofadr[i])
    return int(i)


# --- recordings ------------------------------------------------------------------------------


def default_observe(state: Any) -> Signals:
    """The signals a state shows by default: ``{"qpos", "qvel"}`` of an MJX state, or
    positions and velocities of an ``(x, v)`` state (each raveled to a vector).

    Example:
        >>> from diffsim import default_observe
        >>> {k: v.tolist() for k, v in default_observe((1.0, -2.0)).items()}
        {'qpos': [1.0], 'qvel': [-2.0]}
    """
    if hasattr(state, "qpos") and hasattr(state, "qvel"):
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

    @property
    def num_steps(self) -> int:
        return int(np.shape(next(iter(self.signals.values())))[0]) - 1

    @property
    def num_samples(self) -> int:
        """Observed (non-missing) samples after row 0: the residuals this recording gives."""
        return int(sum(np.sum(np.isfinite(np.asarray(v)[1:])) for v in self.signals.values()))


def _check_recording(i: int, rec: Recording, h: float | None) -> None:
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
        >>> from diffsim import simulate_recording
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
    h = _step_size(step)
    t = None if h is None else h * np.arange(num_steps + 1)
    return Recording(s0, signals, inputs, None, t)


def _step_size(step: Any) -> float | None:
    """The step's concrete time step ``h`` (s), if it declares one."""
    h = getattr(step, "h", None)
    if h is None or not is_concrete(h) or np.ndim(h) != 0:
        return None
    return float(h)


def save_recording(path: str | os.PathLike, rec: Recording) -> None:
    """Write a recording as ``.npz`` or ``.csv`` (by suffix): columns ``time``, the signals
    (``qpos``, ``qvel``, ``sensordata``: MuJoCo's names) and ``ctrl``, one row per sample
    (T + 1 rows; ``ctrl``'s last row repeats the one before). CSV headers are ``time,
    qpos_0, qpos_1, ..., ctrl_0, ...``; an empty CSV cell or NaN is a missing sample.

    Example:
        >>> import os, tempfile
        >>> from diffsim import Recording, load_recording, save_recording
        >>> rec = Recording((0.0, 1.0), {"qpos": [[0.0], [0.1]], "qvel": [[1.0], [1.0]]},
        ...                 time=[0.0, 0.1])
        >>> path = os.path.join(tempfile.mkdtemp(), "rec.csv")
        >>> save_recording(path, rec)
        >>> load_recording(path).signals["qpos"].ravel().tolist()
        [0.0, 0.1]
    """
    cols = _columns(rec)
    path = os.fspath(path)
    if path.endswith(".npz"):
        np.savez(path, **cols)  # pyright: ignore[reportArgumentType]
    elif path.endswith(".csv"):
        header, data = [], []
        for k, v in cols.items():
            v = np.asarray(v, dtype=float).reshape(v.shape[0], -1)
            header += [k] if k == "time" else [f"{k}_{j}" for j in range(v.shape[1])]
            data.append(v)
        np.savetxt(path, np.hstack(data), delimiter=",", header=",".join(header), comments="")
    else:
        raise ValueError(f"path must end in .npz or .csv, got {path!r}")


def _columns(rec: Recording) -> dict[str, np.ndarray]:
    T = rec.num_steps
    unknown = set(rec.signals) - set(FILE_SIGNALS)
    if unknown:
        raise ValueError(
            f"a recording file holds the signals {', '.join(FILE_SIGNALS)}; this one also has "
            f"{', '.join(sorted(unknown))}"
        )
    t = rec.time if rec.time is not None else np.arange(T + 1, dtype=float)
    cols: dict[str, np.ndarray] = {"time": np.asarray(t, dtype=float)}
    cols.update({k: np.asarray(v, dtype=float) for k, v in rec.signals.items()})
    if rec.inputs is not None:
        u = np.asarray(rec.inputs, dtype=float).reshape(T, -1)
        cols["ctrl"] = np.concatenate([u, u[-1:]])
    return cols


def load_recording(
    path: str | os.PathLike,
    *,
    initial_state: Callable[[Any, Any], Any] | None = None,
    control: Callable[[Any], Any] | None = None,
    signals: Sequence[str] | None = None,
) -> Recording:
    """Read a recording written by :func:`save_recording` (or by hand: ``.npz`` arrays or
    ``.csv`` columns named as there). ``time`` and ``qpos`` are required; the initial state
    is ``initial_state(qpos[0], qvel[0])`` (default the pair ``(qpos[0], qvel[0])``;
    an MJX step's ``step.initial_state``); ``ctrl`` row t drives step t → t+1.

    Args:
        path: a ``.npz`` or ``.csv`` file.
        initial_state: builds the state from the first row's ``qpos`` and ``qvel``.
        control: maps the ``(T, nu)`` controls to the step's inputs (default: as they are;
            ``lambda u: u[:, 0]`` for a step that takes a scalar ``u``).
        signals: the signals to fit (default every one the file has).

    Raises:
        ValueError: a missing file or column, rows that disagree, a non-finite time, an
            initial row with NaN.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from diffsim import load_recording
        >>> path = os.path.join(tempfile.mkdtemp(), "ball.npz")
        >>> np.savez(path, time=[0.0, 0.01], qpos=[[1.0], [0.99]], qvel=[[-1.0], [-1.0]])
        >>> rec = load_recording(path, initial_state=lambda q, v: (q[0], v[0]))
        >>> [float(x) for x in rec.s0], rec.num_steps
        ([1.0, -1.0], 1)
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"recording file {path!r} not found")
    cols: dict[str, np.ndarray] = {}
    if path.endswith(".npz"):
        with np.load(path) as f:
            cols = {k: np.asarray(f[k], dtype=float) for k in f.files}
        cols = {k: (v[:, None] if v.ndim == 1 and k != "time" else v) for k, v in cols.items()}
    elif path.endswith(".csv"):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if len(rows) < 3:
            raise ValueError(f"recording file {path!r}: a header and at least two rows needed")
        header = [h.strip().lstrip("# ") for h in rows[0]]
        try:
            data = np.array([[float(c) if c.strip() else np.nan for c in r] for r in rows[1:]])
        except ValueError as err:
            raise ValueError(f"recording file {path!r}: {err}") from None
        if data.ndim != 2 or data.shape[1] != len(header):
            raise ValueError(f"recording file {path!r}: every row needs {len(header)} cells")
        groups: dict[str, list[int]] = {}
        for j, h in enumerate(header):
            groups.setdefault(re.sub(r"_\d+$", "", h), []).append(j)
        cols = {k: data[:, idx] for k, idx in groups.items()}
        if "time" in cols:
            cols["time"] = cols["time"][:, 0]
    else:
        raise ValueError(f"recording file must end in .npz or .csv, got {path!r}")
    for need in ("time", "qpos"):
        if need not in cols:
            raise ValueError(
                f"recording file {path!r} has no {need!r} column; columns: {', '.join(cols)}"
            )
    t = cols["time"]
    if t.ndim != 1 or t.shape[0] < 2 or not np.all(np.isfinite(t)):
        raise ValueError(f"recording file {path!r}: time must be finite with >= 2 rows")
    n = t.shape[0]
    for k, v in cols.items():
        if v.shape[0] != n:
            raise ValueError(f"recording file {path!r}: {k!r} has {v.shape[0]} rows, time {n}")
    unknown = set(cols) - {"time", "ctrl", *FILE_SIGNALS}
    if unknown:
        raise ValueError(
            f"recording file {path!r}: unknown columns {', '.join(sorted(unknown))}; accepted: "
            f"time, ctrl, {', '.join(FILE_SIGNALS)}"
        )
    present = [k for k in FILE_SIGNALS if k in cols]
    chosen = list(signals) if signals is not None else present
    for k in chosen:
        if k not in cols:
            raise ValueError(f"signals names {k!r}, not in {path!r}: {', '.join(present)}")
    q0 = cols["qpos"][0]
    v0 = cols["qvel"][0] if "qvel" in cols else np.zeros_like(q0)
    if not (np.all(np.isfinite(q0)) and np.all(np.isfinite(v0))):
        raise ValueError(f"recording file {path!r}: the first row (the initial state) has NaN")
    build = initial_state or (lambda q, v: (q, v))
    ctrl = cols.get("ctrl")
    return Recording(
        build(q0, v0),
        {k: cols[k] for k in chosen},
        None if ctrl is None else (control or (lambda u: u))(ctrl[:-1]),
        None,
        t,
    )


# --- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdentifyResult:
    """What :func:`identify` found.

    Attributes:
        names: the fitted parameters' names.
        theta: ``{name: estimate}``; ``theta_full``: θ with the estimates put in.
        start: ``{name: start}``.
        std_error, interval_low, interval_high: standard errors and 95 % intervals
            (``inf`` / ``∓inf`` for a parameter the data do not determine).
        covariance: (p, p), in the parameters' units.
        residual: the root mean square of the weighted residuals at θ̂; ``residual_start``
            at the start; ``residual_per_signal``: ``{signal: RMS}``.
        cost: ½‖r‖² at θ̂. ``num_samples``: N, observed samples.
        singular_values: relative singular values of the column-normalised Jacobian.
        unidentifiable: names of parameters the data do not determine at θ̂.
        converged: whether Levenberg–Marquardt met its tolerances within ``max_steps``.
        message: why it stopped.
        iterations: solver steps; ``evaluations``: rollouts (of all recordings) with
            their Jacobians (one per step, one at the start and one at θ̂ of each solve);
            ``rollout_equivalents``: evaluations × (1 + p + #starts) (one per forward-mode
            tangent; the smoothed Jacobian adds 2·M·p rollouts), plus 10·p + 1 + p + #starts for
            each of the doctor's checks (its differences and the exact Jacobian it checks),
            plus, for each probe around θ̂ (``trust="act"``), its Jacobian and its rollouts.
        jacobian_mode, seconds: how the Jacobian was computed, and the wall time.
        jacobian_trusted: whether the doctor's finite-difference check agreed with the
            exact Jacobian at θ̂ (``None``: not checked).
        actions: what the fit did because the doctor did not trust the exact Jacobian
            (``trust="act"``): switched to multiple shooting or to the smoothed Jacobian,
            where and why, or fitted again from a lower probe around θ̂; ``jacobian``:
            ``"exact"`` or ``"smoothed"``, the Jacobian the last solve and the intervals
            used.
        history: ``{"cost": (k,), "theta": (k, p)}``: the accepted iterates.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import identify, simulate_recording, Parameter
        >>> step = lambda s, th: (s[0] + 0.1 * s[1], s[1] - 0.1 * th["c"] * s[1])
        >>> rec = simulate_recording(step, (0.0, 1.0), {"c": jnp.array(0.5)}, 20)
        >>> res = identify(step, rec, {"c": jnp.array(1.0)}, [Parameter("c", lower=0.0)])
        >>> round(res.theta["c"], 6), res.converged
        (0.5, True)
    """

    names: tuple[str, ...]
    theta: dict[str, float]
    theta_full: Any
    start: dict[str, float]
    std_error: dict[str, float]
    interval_low: dict[str, float]
    interval_high: dict[str, float]
    covariance: np.ndarray
    residual: float
    residual_start: float
    residual_per_signal: dict[str, float]
    cost: float
    num_samples: int
    singular_values: tuple[float, ...]
    unidentifiable: tuple[str, ...]
    converged: bool
    message: str
    iterations: int
    evaluations: int
    rollout_equivalents: int
    jacobian_mode: str
    jacobian_trusted: bool | None
    seconds: float
    history: dict[str, np.ndarray] = field(repr=False)
    windows: int = 1
    continuity_defect: float = 0.0
    actions: tuple[str, ...] = ()
    jacobian: str = "exact"

    def __repr__(self) -> str:
        lines = [
            f"IdentifyResult({'converged' if self.converged else 'NOT converged'}: "
            f"{self.message.split('; ')[0]}; {self.iterations} iterations, "
            f"{self.evaluations} evaluations, "
            f"{self.seconds:.2f} s)",
            f"  residual RMS {self.residual:.4g} (start {self.residual_start:.4g}), "
            f"N = {self.num_samples}",
        ]
        for n in self.names:
            lines.append(
                f"  {n:>20s} = {self.theta[n]:.6g} ± {self.std_error[n]:.3g}   "
                f"95% [{self.interval_low[n]:.6g}, {self.interval_high[n]:.6g}]"
                f"   (start {self.start[n]:.6g})"
            )
        if self.unidentifiable:
            lines.append(f"  not identifiable from these data: {', '.join(self.unidentifiable)}")
        lines += [f"  {line}" for line in self.trust_notes]
        if self.windows > 1:
            lines.append(
                f"  multiple shooting: {self.windows} windows per recording, largest "
                f"continuity defect {self.continuity_defect:.3g}"
            )
        return "\n".join(lines)

    @property
    def trust_notes(self) -> tuple[str, ...]:
        """What the doctor found and the fit did about it, one line each (``repr`` and
        ``diffsim identify`` print them)."""
        notes = tuple(f"the doctor: {a}" for a in self.actions)
        if self.jacobian_trusted is False:
            notes += (
                "the exact Jacobian at the estimate disagrees with central finite differences: "
                + (
                    "the intervals come from the smoothed Jacobian the fit used"
                    if self.jacobian == "smoothed"
                    else "the intervals rest on a Jacobian the doctor does not trust"
                ),
            )
        return notes

    def as_dict(self) -> dict[str, Any]:
        """The result as plain numbers and lists (what ``diffsim identify --json`` prints)."""
        return {
            "parameters": list(self.names),
            "theta": [self.theta[n] for n in self.names],
            "std_error": [self.std_error[n] for n in self.names],
            "interval_low": [self.interval_low[n] for n in self.names],
            "interval_high": [self.interval_high[n] for n in self.names],
            "start": [self.start[n] for n in self.names],
            "residual": self.residual,
            "residual_start": self.residual_start,
            "residual_per_signal": self.residual_per_signal,
            "num_samples": self.num_samples,
            "singular_values": list(self.singular_values),
            "unidentifiable": list(self.unidentifiable),
            "converged": self.converged,
            "message": self.message,
            "iterations": self.iterations,
            "evaluations": self.evaluations,
            "rollout_equivalents": self.rollout_equivalents,
            "jacobian_trusted": self.jacobian_trusted,
            "windows": self.windows,
            "continuity_defect": self.continuity_defect,
            "actions": list(self.actions),
            "jacobian": self.jacobian,
            "method": "Levenberg-Marquardt (optimistix), "
            + (
                "smoothed Jacobian (zeroth-order, Gaussian)"
                if self.jacobian == "smoothed"
                else f"exact {self.jacobian_mode} Jacobian"
            )
            + (f", multiple shooting ({self.windows} windows)" if self.windows > 1 else ""),
            "seconds": self.seconds,
        }


def _to_z(p: Parameter, x: float, scale: float) -> float:
    if p.kind == "free":
        return (x - p.start) / scale if p.start is not None else 0.0  # pragma: no cover
    if p.kind == "lower":
        return math.log(x - p.lower)
    if p.kind == "upper":
        return math.log(p.upper - x)
    u = (x - p.lower) / (p.upper - p.lower)
    return math.log(u / (1 - u))


def _from_z(kind: str, lo: float, hi: float, x0: float, scale: float, z):
    if kind == "free":
        return x0 + scale * z
    if kind == "lower":
        return lo + jnp.exp(z)
    if kind == "upper":
        return hi - jnp.exp(z)
    return lo + (hi - lo) * jax.nn.sigmoid(z)


class _Data(eqx.Module):
    s0: Any  # stacked over recordings
    inputs: Any  # (R, T, ...) or None
    observed: dict[str, Any]  # (R, T, k), NaN replaced by 0
    mask: dict[str, Any]  # (R, T, k) bool
    weights: dict[str, Any]  # (R, T, k)


def _stack(recordings: Sequence[Recording], dtype) -> tuple[_Data, int]:
    T = max(r.num_steps for r in recordings)
    names = list(recordings[0].signals)
    for i, r in enumerate(recordings):
        if list(r.signals) != names:
            raise ValueError(
                f"recordings[{i}] has the signals {list(r.signals)}, recordings[0] {names}: "
                f"every recording must observe the same signals"
            )
    obs, mask, wts = {}, {}, {}
    for k in names:
        widths = {np.shape(r.signals[k])[1] for r in recordings}
        if len(widths) != 1:
            raise ValueError(f"signal {k!r} has different widths across recordings: {widths}")
        rows, ms, ws = [], [], []
        for r in recordings:
            y = np.asarray(r.signals[k], dtype=float)[1:]
            w = np.broadcast_to(
                np.asarray((r.weights or {}).get(k, 1.0), dtype=float),
                np.asarray(r.signals[k]).shape,
            )[1:]
            pad = T - y.shape[0]
            y = np.concatenate([y, np.full((pad, y.shape[1]), np.nan)])
            w = np.concatenate([w, np.zeros((pad, y.shape[1]))])
            ms.append(np.isfinite(y) & (w > 0))
            rows.append(np.where(np.isfinite(y), y, 0.0))
            ws.append(w)
        obs[k] = jnp.asarray(np.stack(rows), dtype)
        mask[k] = jnp.asarray(np.stack(ms))
        wts[k] = jnp.asarray(np.stack(ws), dtype)

    def pad_inputs(r: Recording):
        return jax.tree_util.tree_map(
            lambda a: jnp.concatenate(
                [
                    jnp.asarray(a),
                    jnp.zeros((T - np.shape(a)[0],) + np.shape(a)[1:], jnp.asarray(a).dtype),
                ]
            ),
            r.inputs,
        )

    has_inputs = [r.inputs is not None for r in recordings]
    if any(has_inputs) and not all(has_inputs):
        raise ValueError("either every recording has inputs (controls) or none has")
    inputs = None
    if all(has_inputs):
        inputs = jax.tree_util.tree_map(
            lambda *a: jnp.stack(a), *[pad_inputs(r) for r in recordings]
        )
    s0 = jax.tree_util.tree_map(
        lambda *a: jnp.stack([jnp.asarray(x) for x in a]), *[r.s0 for r in recordings]
    )
    return _Data(s0, inputs, obs, mask, wts), T


class _Problem(eqx.Module):
    step: Any  # a pytree (an eqx.Module step) or an opaque callable: filter_jit sorts it
    observe: Any
    params: tuple[Parameter, ...] = eqx.field(static=True)
    num_steps: int = eqx.field(static=True)
    base: Any  # θ with the fixed values
    data: _Data
    # multiple shooting: windows of `window` steps, whose start states (after the first) are
    # unknowns after θ's in x; `unravel` maps a flat state back to the step's pytree
    window: int | None = eqx.field(static=True, default=None)
    unravel: Any = eqx.field(static=True, default=None)
    continuity: Any = 1.0
    # a smoothed Jacobian (the fit's remedy when the doctor does not trust the exact one):
    # θ's columns are the Gaussian-smoothed residuals' Jacobian, estimated from the fixed
    # antithetic draws `smooth_eps` (p, M) at the scales `smooth_sigma` (p,)
    smooth_eps: Any = None
    smooth_sigma: Any = None

    def theta_of(self, x):
        theta = dict(self.base)
        for j, p in enumerate(self.params):
            theta[p.field] = jnp.asarray(theta[p.field]).at[p.index].set(x[j])
        return theta

    @property
    def num_windows(self) -> int:
        return 1 if self.window is None else -(-self.num_steps // self.window)

    def _windows(self, theta, s0, u, starts):
        """One recording's windows from s0 and the flat starts (K − 1, n): the predicted
        observations (T, ·) and the continuity defects (K − 1, n)."""
        W, K = self.window, self.num_windows
        assert W is not None
        flat0, _ = ravel_pytree(_physical(s0))
        first = jnp.concatenate([flat0[None], starts])  # (K, n)
        pad = K * W - self.num_steps
        u = jax.tree_util.tree_map(
            lambda a: jnp.concatenate([a, jnp.zeros((pad,) + a.shape[1:], a.dtype)]).reshape(
                (K, W) + a.shape[1:]
            ),
            u,
        )

        def window(flat, uk):
            start = _with_memory(self.unravel(flat), s0)
            traj = rollout(self.step, start, theta, W, inputs=uk, include_initial=False)
            end = jax.tree_util.tree_map(lambda a: a[-1], traj)
            return jax.vmap(self.observe)(traj), ravel_pytree(_physical(end))[0]

        pred, ends = jax.vmap(window, in_axes=(0, None if u is None else 0))(first, u)
        pred = {k: v.reshape((K * W,) + v.shape[2:])[: self.num_steps] for k, v in pred.items()}
        return pred, ends[:-1] - starts

    def residuals(self, x):
        """Weighted residuals (masked samples 0), one flat vector, for physical values x
        (then, with shooting, the continuity defects times ``continuity``); differentiated
        exactly, or through :meth:`smoothed_jacobian` in θ's columns when smoothing is set."""
        if self.smooth_eps is None:
            # the rows, counted without tracing the rollout again: the observed samples,
            # and with shooting one continuity defect per start-state entry
            rows = sum(int(np.prod(v.shape)) for v in self.data.observed.values())
            rows += x.shape[0] - len(self.params) if self.window is not None else 0
            if x.shape[0] <= rows:
                return _forward_mode(self.exact_residuals)(x)
            return self.exact_residuals(x)
        p = len(self.params)

        @jax.custom_jvp
        def r(x):
            return self.exact_residuals(x)

        @r.defjvp
        def r_jvp(primals, tangents):
            (x,), (dx,) = primals, tangents
            y = self.exact_residuals(x)
            dy = self.smoothed_jacobian(x) @ dx[:p]
            if x.shape[0] > p:  # shooting's start states: their exact columns
                dy = dy + jax.jvp(self.exact_residuals, (x,), (dx.at[:p].set(0.0),))[1]
            return y, dy

        return r(x)

    def smoothed_jacobian(self, x):
        r"""θ's columns of the smoothed residuals' Jacobian: column j is the slope of the
        residuals along θ_j over Gaussian offsets of scale σ_j,

        .. math:: J_{:j} = \frac{\sum_i \big(r(θ + σ_jε_{ji}e_j) - r(θ - σ_jε_{ji}e_j)\big)\,
                  ε_{ji}}{2σ_j \sum_i ε_{ji}^2},

        over fixed draws ε (p, M) (common random numbers: the same draws at every θ, so the
        fit sees one deterministic Jacobian field). In expectation the derivative of the
        residuals smoothed along θ_j (the zeroth-order estimate, normalised by the draws'
        own second moment), exact for a response linear or quadratic in θ_j; one
        parameter at a time, so a parameter with no effect gets an exactly zero column,
        not the others' sampling noise."""
        p = len(self.params)
        eps, sig = self.smooth_eps, self.smooth_sigma

        def column(j, e_j, s_j):
            def diff(e):
                d = jnp.zeros_like(x).at[j].set(s_j * e)
                return (self.exact_residuals(x + d) - self.exact_residuals(x - d)) * e

            return jnp.sum(jax.vmap(diff)(e_j), axis=0) / (2 * s_j * jnp.sum(e_j**2))

        return jax.vmap(column, out_axes=1)(jnp.arange(p), eps, sig)

    def exact_residuals(self, x):
        p = len(self.params)
        theta = self.theta_of(x[:p])
        in_axes = (0, None if self.data.inputs is None else 0)
        defects = None
        if self.window is None:

            def one(s0, u):
                traj = rollout(self.step, s0, theta, self.num_steps, inputs=u,
                               include_initial=False)  # fmt: skip
                return jax.vmap(self.observe)(traj)

            pred = jax.vmap(one, in_axes=in_axes)(self.data.s0, self.data.inputs)
        else:
            R = jax.tree_util.tree_leaves(self.data.s0)[0].shape[0]
            starts = x[p:].reshape(R, self.num_windows - 1, -1)
            pred, defects = jax.vmap(
                lambda s0, u, st: self._windows(theta, s0, u, st), in_axes=in_axes + (0,)
            )(self.data.s0, self.data.inputs, starts)
        out = []
        for k in self.data.observed:
            d = self.data
            diff = (jnp.asarray(pred[k]).reshape(d.observed[k].shape) - d.observed[k]) * d.weights[
                k
            ]
            out.append(jnp.where(d.mask[k], diff, 0.0).ravel())
        if defects is not None:
            out.append(self.continuity * defects.ravel())
        return jnp.concatenate(out)


def _forward_mode(f: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    """``f`` whose derivative is always its forward-mode Jacobian: a ``custom_jvp`` whose
    rule builds ``J`` with one tangent per column of x (``vmap`` of ``jvp``) and returns
    ``J @ dx``. Reverse mode (Optimistix's ``Jᵀr``, the doctor's gradient) then transposes
    that product, not the rollout, so no program of the fit holds the rollout's transpose,
    which compiles several times slower than its tangent on MuJoCo models (half_cheetah,
    T = 100: 55 s → 26 s for the fit's program). Used when x (the fitted parameters and
    shooting's start states) has no more entries than the residuals."""

    @jax.custom_jvp
    def g(x):
        return f(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        y, J = _value_and_jacfwd(f, x)
        return y, J @ dx

    return g


def _value_and_jacfwd(f: Callable[[jax.Array], jax.Array], x: jax.Array):
    """``(f(x), J)``: one linearization, J's columns its tangents along each unit vector."""
    y, lin = jax.linearize(f, x)
    return y, jax.vmap(lin, out_axes=1)(jnp.eye(x.shape[0], dtype=x.dtype))


class _Fit(eqx.Module):
    problem: _Problem
    lo: Any
    hi: Any
    x0: Any
    scale: Any
    extra0: Any = None  # multiple shooting: the start states' initial guess (flat) ...
    extra_scale: Any = None  # ... and their scale

    def physical(self, z):
        p = len(self.problem.params)
        theta = jnp.stack(
            [
                _from_z(q.kind, self.lo[j], self.hi[j], self.x0[j], self.scale[j], z[j])
                for j, q in enumerate(self.problem.params)
            ]
        )
        if self.extra0 is None:
            return theta
        return jnp.concatenate([theta, self.extra0 + self.extra_scale * z[p:]])

    def residuals_z(self, z, args):
        return self.problem.residuals(self.physical(z)), None


@eqx.filter_jit
def _jacobian(problem: _Problem, x):
    return _value_and_jacfwd(problem.residuals, x)


@eqx.filter_jit
def _exact_residuals(problem: _Problem, x):
    """The residuals at x, compiled once per problem structure (called eagerly, the
    rollout's ``scan`` would be traced and compiled again on every fit)."""
    return problem.exact_residuals(x)


def _optimistix() -> Any:
    """Optimistix, imported when a fit runs (it needs Python >= 3.11: on 3.10 the rest of
    diffsim works and ``identify`` says what to install)."""
    try:
        import optimistix
    except ImportError as err:  # pragma: no cover - Python 3.10 / not installed
        raise ImportError(
            "diffsim.identify needs optimistix (Python >= 3.11): pip install 'optimistix>=0.1.0'"
            f" ({err})"
        ) from None
    return optimistix


@eqx.filter_jit
def _solve(fit: _Fit, z0, rtol: float, atol: float, max_steps: int, jac: str):
    optx = _optimistix()
    solver = optx.LevenbergMarquardt(rtol=rtol, atol=atol)
    fn = fit.residuals_z
    options = {"jac": jac}
    f_struct = jax.eval_shape(lambda z: fn(z, None)[0], z0)
    state = solver.init(fn, z0, None, options, f_struct, None, frozenset())
    hist_z = jnp.full((max_steps + 1, z0.shape[0]), jnp.nan, z0.dtype)
    hist_c = jnp.full((max_steps + 1,), jnp.nan, z0.dtype)

    dynamic, static = eqx.partition(state, eqx.is_array)  # the Jacobian's jaxpr is static

    def cond(carry):
        _, dyn, k, _, _ = carry
        st = eqx.combine(dyn, static)
        done, result = solver.terminate(fn, z0, None, options, st, frozenset())
        return (~done) & (result == optx.RESULTS.successful) & (k < max_steps)

    def body(carry):
        z, dyn, k, hz, hc = carry
        z, st, _ = solver.step(fn, z, None, options, eqx.combine(dyn, static), frozenset())
        cost = 0.5 * jnp.sum(st.f_info.residual**2)
        return z, eqx.filter(st, eqx.is_array), k + 1, hz.at[k].set(z), hc.at[k].set(cost)

    z, dynamic, k, hist_z, hist_c = jax.lax.while_loop(cond, body, (z0, dynamic, 0, hist_z, hist_c))
    state = eqx.combine(dynamic, static)
    done, result = solver.terminate(fn, z, None, options, state, frozenset())
    ok = done & (result == optx.RESULTS.successful)
    return z, k, ok, hist_z, hist_c


def identify(
    step: Callable[..., Any],
    recordings: Recording | Sequence[Recording],
    theta: Mapping[str, Any],
    parameters: str | Sequence[str | Parameter],
    *,
    observe: Callable[[Any], Signals] = default_observe,
    model: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    max_steps: int = 100,
    rtol: float | None = None,
    atol: float | None = None,
    rank_rtol: float | None = None,
    trust: str = "act",
    shooting: int | None = None,
    state_of: Callable[[Signals], Any] | None = None,
    continuity_weight: float | None = None,
) -> IdentifyResult:
    r"""Fit ``parameters`` of θ so that ``step`` reproduces ``recordings`` (module docstring:
    the least-squares problem, the bounds, the intervals, identifiability).

    Args:
        step: the diffsim step ``step(state, theta[, u])`` (a system's step, a
            ``WithContact``, an ``MjxStep``, ...).
        recordings: one :class:`Recording` or several (of any lengths: shorter ones are
            padded with missing samples; all run as one ``vmap``).
        theta: the full θ, a dict: the fixed values and the default starts.
        parameters: what to fit: :class:`Parameter` objects or names as
            :func:`parse_parameters` reads them (``"k"``, ``"m[1]"``, ``"body_mass:box"``).
        observe: ``state -> {signal: vector}`` for the recorded signals (default
            :func:`default_observe`); signals it gives that a recording lacks are ignored.
        model: the ``mujoco.MjModel`` for ``field:element`` names.
        bounds: ``{name: (lower, upper)}`` for parameters given by name.
        max_steps: Levenberg–Marquardt steps at most (>= 1).
        rtol, atol: the solver's tolerances (Optimistix's Cauchy criterion on the step
            and the residual change); default 1e-8 in float64, 1e-5 in float32.
        rank_rtol: relative singular value below which a direction is not identified;
            default 10·√ε (1.5e-7 in float64, 3.5e-3 in float32).
        trust: what the fit does about the doctor's check of the exact Jacobian
            (:func:`diffsim.check_grad` of a fixed random projection :math:`c^\top r(θ)`
            against central finite differences: 10·p rollouts per check, the gradient
            :math:`c^\top J` from the fit's own Jacobian).
            ``"act"`` (default): checked at the start and at θ̂; where it is not trusted
            (a contact switch inside the difference step, a stiff or chaotic response)
            the fit switches — once — to multiple shooting with the longest windows
            (T/4, T/16, T/64 steps) whose Jacobian the doctor trusts, when the recordings
            give the window starts (``state_of``, or recorded ``qpos``) and
            ``shooting`` was not chosen, else to the smoothed Jacobian (each parameter's
            residuals smoothed by a Gaussian of :data:`SMOOTHING_SCALE` of its value,
            estimated from :data:`SMOOTHING_DRAWS` fixed antithetic draws); a fit that
            found it at θ̂ then runs again from θ̂. Where the exact Jacobian is
            rank-deficient at the start but the smoothed one is not (a plateau), it
            switches to the smoothed Jacobian instead of raising
            :class:`NotIdentifiableError`. Last, it probes the cost around θ̂ at the scale of
            the intervals it would report (each parameter alone at :data:`PROBE_WIDTHS` of
            its 95 % half-width: 4·p rollouts and a Jacobian): where a probe is lower by more
            than :data:`PROBE_GAIN` (θ̂ was held on a step of the residual, a contact event
            moving from one time step to the next), it fits again from there, at most
            :data:`PROBE_RESTARTS` times. The result's ``actions`` and ``message`` say what
            was done. ``"report"``: checked at θ̂ only, nothing changed.
            ``"off"``: no check (``jacobian_trusted`` is ``None``).
        shooting: multiple shooting with windows of this many steps (>= 1, fewer than
            the longest recording's T): each recording is cut into windows, every window
            after the first starts from a state fitted with θ, and continuity residuals
            (a window's end state minus the next one's start, times ``continuity_weight``)
            tie them together. For long or chaotic recordings, where one rollout over the
            whole recording has a landscape too rough to descend. The intervals are θ's
            with the start states as nuisance parameters (the θ block of the covariance).
        state_of: multiple shooting: ``state_of(row) -> state``, the state a recorded row
            ``{signal: vector}`` (one sample) implies, for the window starts' first guess.
            Default: the recorded ``qpos`` and ``qvel`` when ``observe`` is
            :func:`default_observe` and the recording holds ``qpos`` (its ``qvel``, or where
            none is recorded the backward difference of the positions, (q_t − q_{t−1})/h:
            exact for semi-implicit Euler); otherwise (and where a row has a missing
            sample) the simulation at the start θ, which on a chaotic system is far from the
            data by the later windows: pass ``state_of`` there. Fields a state type names
            in ``SOLVER_MEMORY`` (an MJX state's warm start) are neither fitted nor tied.
        continuity_weight: multiple shooting: the weight of the continuity residuals
            (state units); default 1000 × the mean weight of the data.

    Returns:
        :class:`IdentifyResult`.

    Raises:
        ValueError: an empty parameter set, unknown fields or names, bounds that exclude
            the start, a start that is not finite, recordings whose shapes, signals or
            times do not match the step or each other, non-finite data, fewer observed
            samples than parameters. :class:`NotIdentifiableError` (a ``ValueError``) when
            the Jacobian at the start is rank-deficient: the message names the parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim import identify, simulate_recording
        >>> from diffsim.systems import nonlinear_spring
        >>> sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=2.0, c=0.3)
        >>> rec = simulate_recording(sys.step, sys.s0, sys.theta, 300)
        >>> start = dict(sys.theta, k=jnp.array(3.0), c=jnp.array(0.1))
        >>> res = identify(sys.step, rec, start, "k, c", bounds={"k": (0, 10), "c": (0, 1)})
        >>> round(res.theta["k"], 6), round(res.theta["c"], 6)
        (4.0, 0.3)
    """
    t_start = time.perf_counter()
    recs = [recordings] if isinstance(recordings, Recording) else list(recordings)
    if not recs:
        raise ValueError("recordings must hold at least one Recording, got none")
    if not isinstance(theta, Mapping):
        raise ValueError(f"theta must be a dict of arrays, got {type(theta).__name__}")
    theta = {k: jnp.asarray(v) for k, v in theta.items()}
    for k, v in theta.items():
        if not bool(jnp.all(jnp.isfinite(v))):
            raise ValueError(f"theta[{k!r}] must be finite")
    if isinstance(parameters, str) or (parameters and all(isinstance(p, str) for p in parameters)):
        params = parse_parameters(parameters, theta, model=model, bounds=bounds)  # type: ignore[arg-type]
    else:
        if not parameters:
            raise ValueError("parameters must name at least one entry of theta, got none")
        params = tuple(
            p if isinstance(p, Parameter) else parse_parameters([p], theta, model=model)[0]
            for p in parameters
        )
        if bounds:
            raise ValueError("bounds applies to parameters given by name; set Parameter bounds")
    labels = [p.label for p in params]
    if len(set(labels)) != len(labels):
        raise ValueError(f"parameters must be distinct, got {labels}")
    max_steps = check_int("max_steps", max_steps, minimum=1)
    if trust not in TRUST:
        raise ValueError(f"trust must be one of {', '.join(map(repr, TRUST))}, got {trust!r}")
    dtype = jnp.result_type(float)
    eps = float(jnp.finfo(dtype).eps)
    rtol = (1e-8 if eps < 1e-10 else 1e-5) if rtol is None else float(rtol)
    atol = (1e-8 if eps < 1e-10 else 1e-5) if atol is None else float(atol)
    rank_rtol = 10 * math.sqrt(eps) if rank_rtol is None else float(rank_rtol)

    # starting values and bounds
    resolved = []
    for p in params:
        if p.field not in theta:
            raise ValueError(
                f"parameter {p.label!r}: theta has no field {p.field!r}; fields: {', '.join(theta)}"
            )
        try:
            value = float(theta[p.field][p.index]) if p.start is None else float(p.start)
        except (IndexError, TypeError):
            raise ValueError(
                f"parameter {p.label!r}: index {p.index} is outside theta[{p.field!r}]'s shape "
                f"{tuple(theta[p.field].shape)}"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"parameter {p.label!r}: the start must be finite, got {value}")
        if not (p.lower < p.upper) or math.isnan(p.lower) or math.isnan(p.upper):
            raise ValueError(
                f"parameter {p.label!r}: bounds must satisfy lower < upper, got "
                f"({p.lower}, {p.upper})"
            )
        if not (p.lower < value < p.upper):
            raise ValueError(
                f"parameter {p.label!r}: the start {value:g} must lie strictly inside its "
                f"bounds ({p.lower:g}, {p.upper:g})"
            )
        resolved.append(Parameter(p.field, p.index, value, p.lower, p.upper, p.label))
    params = tuple(resolved)
    x0 = np.array([p.start for p in params], dtype=float)
    scale = np.where(x0 != 0, np.abs(x0), 1.0)

    h = _step_size(step)
    for i, r in enumerate(recs):
        _check_recording(i, r, h)
    data, T = _stack(recs, dtype)
    N = int(sum(int(jnp.sum(m)) for m in data.mask.values()))
    p_count = len(params)
    if N <= p_count:
        raise ValueError(
            f"the recordings hold {N} observed samples for {p_count} parameters: at least "
            f"{p_count + 1} are needed (more to estimate the noise)"
        )
    # the signals observe gives must cover the recorded ones
    s0_one = jax.tree_util.tree_map(lambda a: a[0], data.s0)
    try:
        shown = jax.eval_shape(observe, s0_one)
    except TypeError as err:
        raise TypeError(f"observe could not be applied to the state: {err}") from err
    missing = [k for k in data.observed if k not in shown]
    if missing:
        raise ValueError(
            f"the recordings hold the signals {', '.join(missing)}, which observe does not give "
            f"(it gives {', '.join(shown) or 'none'}): pass observe=state -> {{signal: vector}}"
        )
    for k in data.observed:
        width = data.observed[k].shape[-1]
        if int(np.prod(shown[k].shape)) != width:
            raise ValueError(
                f"signal {k!r}: the recording has {width} columns, the model's state gives "
                f"{int(np.prod(shown[k].shape))}"
            )
    observe_recorded = _Subset(observe, tuple(data.observed))
    # the starts are data (x0 below), not part of the compiled program's cache key
    static_params = tuple(
        Parameter(p.field, p.index, None, p.lower, p.upper, p.label) for p in params
    )
    # a fitted field given as integers (theta={"g": jnp.array(10)}) is fitted as reals: set
    # into an integer array, every value would round and its derivative would be zero
    fitted = {p.field for p in params}
    theta = {
        k: jnp.asarray(v, dtype)
        if k in fitted and not jnp.issubdtype(jnp.asarray(v).dtype, jnp.inexact)
        else v
        for k, v in theta.items()
    }
    problem = _Problem(step, observe_recorded, static_params, T, theta, data)
    x0j = jnp.asarray(x0, dtype)
    extra0 = extra_scale = None
    n_extra = 0
    if shooting is not None:
        problem, extra0, extra_scale = _shooting_problem(
            problem, recs, shooting, state_of, continuity_weight, x0j, dtype
        )
        n_extra = int(extra0.shape[0])
        if N <= p_count + n_extra:
            raise ValueError(
                f"shooting = {shooting}: the recordings hold {N} observed samples for "
                f"{p_count} parameters and {n_extra} start-state entries: use longer windows"
            )
    n_data = int(sum(int(np.prod(o.shape)) for o in data.observed.values()))
    x0_all = x0j if extra0 is None else jnp.concatenate([x0j, extra0])
    labels_all = labels + [f"window start [{i}]" for i in range(n_extra)]

    # identifiability at the start: the exact Jacobian's; where it is rank-deficient but the
    # smoothed one is not (a plateau: zero derivative where moving θ does change the data),
    # the fit acts on it with the smoothed Jacobian
    actions: list[str] = []
    checks = [0, 0]  # the doctor's checks run (10·p rollouts each, and a Jacobian); rollouts
    r0, J0 = _jacobian(problem, x0_all)
    _check_finite_jacobian(r0, J0, labels_all)
    sv0, V0 = _scaled_svd(_theta_block(np.asarray(J0), p_count))
    bad0 = _unidentified(sv0, V0, labels, rank_rtol)
    if bad0 and trust == "act":
        smoothed = _smoothed(problem, x0, dtype)
        _, Js = _jacobian(smoothed, x0_all)
        svs, Vs = _scaled_svd(_theta_block(np.asarray(Js), p_count))
        # a clear margin: smoothing itself decorrelates parameters that act only together
        # (m and k through k/m) by O(σ²) = 0.25 %, which must not count as identified
        clear = max(rank_rtol, SMOOTHING_SCALE)
        if np.all(np.isfinite(np.asarray(Js))) and not _unidentified(svs, Vs, labels, clear):
            actions.append(
                f"at the start the exact Jacobian does not see {', '.join(bad0)} (a plateau: "
                f"zero derivative, while the data change within {SMOOTHING_SCALE:.0%} of each "
                "parameter): switched to the smoothed Jacobian"
            )
            problem, bad0 = smoothed, ()
    if bad0:
        raise NotIdentifiableError(
            f"the recordings do not determine {', '.join(bad0)} at the start (relative "
            f"singular values of the column-normalised Jacobian {_fmt(sv0)}, threshold "
            f"{rank_rtol:.2g}): a parameter with no effect on the observed signals, or "
            f"several that only act together; fix one of them, record other signals, or "
            f"excite the system differently",
            bad0,
            tuple(sv0),
        )

    def exact_trusted(prob, x_all) -> bool:
        """The doctor's check (:func:`diffsim.check_grad`) of the exact Jacobian at x: θ's
        columns, through a fixed random projection of the residuals (shooting's starts held)."""
        from .doctor import check_grad  # the doctor's own test, not a second one

        checks[0] += 1
        # the gradient checked is cᵀJ from the fit's own Jacobian program (compiled once per
        # problem): the check itself compiles only the rollout, batched over the differences
        exact = dataclasses.replace(prob, smooth_eps=None, smooth_sigma=None)
        r, J = _jacobian(exact, jnp.asarray(x_all, dtype))
        c = jax.random.normal(jax.random.key(0), (r.shape[0],), dtype)
        proj = _Projected(prob, c, jnp.asarray(x_all[p_count:], dtype))
        grad = c @ J[:, :p_count]
        return bool(check_grad(proj, jnp.asarray(x_all[:p_count], dtype), gradient=grad).ok)

    def shorter_windows(prob, x_theta, where: str, below: int):
        """Multiple shooting with the longest windows, of T/4, T/16 and T/64 steps (and
        fewer than ``below``), whose exact Jacobian the doctor trusts and which stay nearly
        linear 5 % away — when the recordings give the window starts and the user chose no
        windows; ``None`` when none qualifies."""
        so = state_of or _default_starts(step, recs[0], observe_recorded.observe)[0]
        if shooting is not None or so is None:
            return None
        T_ = prob.num_steps
        for W in (T_ // 4, T_ // 16, T_ // 64):
            if W >= below:
                continue
            if W < MIN_AUTO_WINDOW:
                break
            shot, e0, es = _shooting_problem(prob, recs, W, state_of, continuity_weight,
                                             jnp.asarray(x_theta, dtype), dtype)  # fmt: skip
            if N <= p_count + int(e0.shape[0]):
                break
            x_all = jnp.concatenate([jnp.asarray(x_theta, dtype), e0])
            if exact_trusted(shot, x_all) and _nearly_linear(shot, x_all, checks):
                return shot, e0, es, (
                    f"{where}: over windows of {W} steps the doctor trusts the exact Jacobian "
                    f"and it predicts the residuals {SMOOTHING_SCALE:.0%} away: switched to "
                    f"multiple shooting ({shot.num_windows} windows per recording)"
                )  # fmt: skip
        return None

    def remedy(prob, x_theta, where: str):
        """What the fit does when the doctor does not trust the exact Jacobian at x_theta:
        :func:`shorter_windows`, else the smoothed Jacobian. Returns the new problem, its
        start states' guess and scale (shooting) and the action's text."""
        where = f"{where} the exact Jacobian disagrees with central finite differences"
        shot = shorter_windows(prob, x_theta, where + " (diffsim.check_grad)", prob.num_steps)
        if shot is not None:
            return shot
        e0 = None if prob.window is None else extra0
        es = None if prob.window is None else extra_scale
        return _smoothed(prob, x_theta, dtype), e0, es, (
            f"{where} (diffsim.check_grad; e.g. a contact switch within the difference step, "
            f"a stiff or chaotic response): switched to the smoothed Jacobian (each "
            f"parameter's residuals smoothed by a Gaussian of {SMOOTHING_SCALE:.0%} of its "
            f"value, {SMOOTHING_DRAWS} antithetic draws)"
        )  # fmt: skip

    def probe(prob, x_all):
        """The lowest of the cost at θ̂ and at :data:`PROBE_WIDTHS` of each parameter's 95 %
        half-width from it (inside its bounds; shooting's starts held): ``(θ, note)`` when
        a probe lowers the cost by more than :data:`PROBE_GAIN`, else ``None``."""
        xa = jnp.asarray(x_all, dtype)
        r_, J_ = (np.asarray(a, dtype=float) for a in _jacobian(prob, xa))
        n_x = int(xa.shape[0])
        checks[1] += 1 + n_x + (2 * SMOOTHING_DRAWS * p_count if prob.smooth_eps is not None else 0)
        dof_ = N - n_x
        cov_ = _covariance(r_[:n_data], J_, p_count, dof_, rank_rtol)
        half = _t_quantile(dof_) * np.sqrt(np.maximum(np.diag(cov_), 0.0))
        x_np = np.asarray(x_all, dtype=float)
        points, moves = [], []
        for j, par in enumerate(params):
            for k in PROBE_WIDTHS:
                v = x_np[j] + k * half[j]
                if np.isfinite(v) and half[j] > 0 and par.lower < v < par.upper:
                    x = x_np.copy()
                    x[j] = v
                    points.append(x)
                    moves.append((j, k))
        if not points:
            return None
        checks[1] += len(points)
        exact = dataclasses.replace(prob, smooth_eps=None, smooth_sigma=None)
        c = np.asarray(_costs(exact, jnp.asarray(np.stack(points), dtype)))
        c0 = float(np.sum(np.asarray(_exact_residuals(exact, xa)) ** 2))
        best = int(np.argmin(np.where(np.isfinite(c), c, np.inf)))
        drop = c0 - c[best]
        if not (np.isfinite(c[best]) and drop > PROBE_GAIN * c0 and drop > rounding):
            return None
        j, k = moves[best]
        return points[best][:p_count], (
            f"at the estimate {labels[j]} moved by {k:+g} of its 95 % half-widths "
            f"({x_np[j]:.8g} → {points[best][j]:.8g}) lowers the cost by "
            f"{1.0 - c[best] / c0:.1%}: the estimate was not a minimum at the scale of its "
            f"own intervals (the residual steps there, e.g. a contact event moving from one "
            f"time step to the next as θ changes)"
        )  # fmt: skip

    # costs closer than this to each other are rounding: 100·ε of the data's own ‖y‖²
    rounding = (
        100
        * float(jnp.finfo(dtype).eps)
        * sum(
            float(jnp.sum(jnp.where(data.mask[k], data.observed[k] * data.weights[k], 0.0) ** 2))
            for k in data.observed
        )
    )
    single = problem  # before any remedy: what shorter windows are cut from
    remedied = bool(actions)  # a remedy (the smoothed Jacobian, shooting) is applied once
    restarts = 0  # fits started again from a lower probe
    if trust == "act" and not remedied and not exact_trusted(problem, x0_all):
        problem, extra0, extra_scale, note = remedy(problem, x0, "at the start")
        actions.append(note)
        remedied = True

    # the fit; then, with trust="act": when the doctor does not trust the exact Jacobian at
    # the estimate and nothing was done yet, the remedy and a fit from there; when windows
    # the fit chose itself did not converge, shorter ones from there
    fit_runs: list[tuple[Any, ...]] = []
    x_theta_start = np.asarray(x0, dtype=float)
    trusted: bool | None = None
    while True:
        n_extra = 0 if extra0 is None else int(extra0.shape[0])
        if N <= p_count + n_extra:
            raise ValueError(
                f"shooting = {problem.window}: the recordings hold {N} observed samples "
                f"for {p_count} parameters and {n_extra} start-state entries: use longer "
                "windows"
            )
        run = _fit_run(problem, params, x_theta_start, x0j, scale, extra0, extra_scale, dtype,
                       rtol, atol, max_steps)  # fmt: skip
        fit_runs.append(run)
        x_hat_all = run[0]
        x_theta_start = np.asarray(x_hat_all[:p_count], dtype=float)
        trusted = None if trust == "off" else exact_trusted(problem, x_hat_all)
        if trust != "act":
            break
        if trusted is False and not remedied:
            problem, extra0, extra_scale, note = remedy(problem, x_theta_start, "at the estimate")
            actions.append(note + ", and fitted again from the estimate")
            remedied = True
            continue
        exact = dataclasses.replace(problem, smooth_eps=None, smooth_sigma=None)
        if (
            trusted
            and problem.smooth_eps is not None
            and run[3]
            and _full_rank(exact, x_hat_all, p_count, labels, rank_rtol)
        ):
            # the smoothed Jacobian brought the fit where the exact one is trusted (and not
            # flat): finish with it, so the estimate and its intervals are the exact problem's
            problem = exact
            actions.append(
                "at the estimate the doctor trusts the exact Jacobian: fitted again from "
                "there with it (the estimate and its intervals use the exact Jacobian)"
            )
            continue
        if not run[2] and run[3] and shooting is None and problem.window is not None:
            shot = shorter_windows(
                single,
                x_theta_start,
                f"windows of {problem.window} steps did not converge in max_steps",
                problem.window,
            )
            if shot is not None:
                problem, extra0, extra_scale, note = shot
                actions.append(note + ", and fitted again from their estimate")
                continue
        lower = probe(problem, x_hat_all) if run[3] else None
        if lower is not None and restarts < PROBE_RESTARTS:
            x_theta_start, note = lower
            restarts += 1
            actions.append(note + ": fitted again from there")
            continue
        if lower is not None:
            actions.append(
                lower[1] + f", still after {PROBE_RESTARTS} restarts: the intervals do not "
                "describe the cost around the estimate"
            )
        break

    x_hat, _, ok, finite, jac = fit_runs[-1][:5]
    k_total = sum(run[1] for run in fit_runs)
    hist_theta = np.concatenate([run[5] for run in fit_runs])
    hist_cost = np.concatenate([run[6] for run in fit_runs])
    n_extra = 0 if extra0 is None else int(extra0.shape[0])
    r, J = (np.asarray(a, dtype=float) for a in _jacobian(problem, jnp.asarray(x_hat, dtype)))
    x_hat = np.asarray(x_hat, dtype=float)
    defect = float(np.max(np.abs(r[n_data:]), initial=0.0)) / float(problem.continuity)
    r = r[:n_data] if n_extra else r  # the data's residuals (the defects are constraints)
    x_hat = x_hat[:p_count]

    sv, V = _scaled_svd(_theta_block(J, p_count))
    bad = _unidentified(sv, V, labels, rank_rtol)
    dof = N - p_count - n_extra
    cov = _covariance(r, J, p_count, dof, rank_rtol)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    se = np.where([n in bad for n in labels], np.inf, se)
    tq = _t_quantile(dof)
    per_signal = {}
    offset = 0
    for key in data.observed:
        size = int(np.prod(data.observed[key].shape))
        m = int(jnp.sum(data.mask[key]))
        seg = r[offset : offset + size]
        per_signal[key] = float(np.sqrt(seg @ seg / max(m, 1)))
        offset += size
    smoothed_fit = problem.smooth_eps is not None
    if not finite:
        message = "the simulation went non-finite; the last finite iterate is reported"
        ok = False
    elif bool(ok):
        message = f"converged (rtol {rtol:g}, atol {atol:g})"
    else:
        message = f"did not converge in max_steps = {max_steps} steps; the last iterate is reported"
    if actions:
        message += "; " + "; ".join(actions)
    if trusted is False:
        message += (
            "; the exact Jacobian at the estimate disagrees with central finite differences "
            "(diffsim.check_grad)"
            + (
                ": the intervals come from the smoothed Jacobian the fit used"
                if smoothed_fit
                else ": the intervals rest on a Jacobian the doctor does not trust"
            )
        )
    names = tuple(labels)
    theta_full = problem.theta_of(jnp.asarray(x_hat, dtype))
    # a Jacobian: one rollout and p + #starts tangents (exact), or 2·M·p rollouts (smoothed)
    per_jac = 1 + p_count + n_extra + (2 * SMOOTHING_DRAWS * p_count if smoothed_fit else 0)
    evaluations = k_total + 2 * len(fit_runs)
    return IdentifyResult(
        names=names,
        theta=dict(zip(names, map(float, x_hat))),
        theta_full=theta_full,
        start=dict(zip(names, map(float, x0))),
        std_error=dict(zip(names, map(float, se))),
        interval_low=dict(zip(names, map(float, x_hat - tq * se))),
        interval_high=dict(zip(names, map(float, x_hat + tq * se))),
        covariance=cov,
        residual=float(np.sqrt(r @ r / N)),
        residual_start=float(np.sqrt(float(jnp.sum(r0[:n_data] ** 2)) / N)),
        residual_per_signal=per_signal,
        cost=0.5 * float(r @ r),
        num_samples=N,
        singular_values=tuple(float(s) for s in sv),
        unidentifiable=bad,
        converged=bool(ok),
        message=message,
        iterations=k_total,
        evaluations=evaluations,
        rollout_equivalents=evaluations * per_jac
        + checks[0] * (10 * p_count + 1 + p_count + n_extra)
        + checks[1],
        jacobian_mode={"fwd": "forward-mode", "bwd": "reverse-mode"}[jac],
        jacobian_trusted=trusted,
        seconds=time.perf_counter() - t_start,
        history={"cost": hist_cost, "theta": hist_theta},
        windows=problem.num_windows,
        continuity_defect=defect if n_extra else 0.0,
        actions=tuple(actions),
        jacobian="smoothed" if smoothed_fit else "exact",
    )


SMOOTHING_SCALE = 0.05
"""The smoothed Jacobian's Gaussian, as a fraction of each parameter's value (its scale for
a parameter at 0): the doctor's default σ (:func:`diffsim.doctor.default_sigma`)."""

SMOOTHING_DRAWS = 16
"""Antithetic draws per parameter of the smoothed Jacobian."""

MIN_AUTO_WINDOW = 5
"""The shortest window the fit's own switch to multiple shooting tries, in steps."""

PROBE_WIDTHS = (-2.0, -1.0, 1.0, 2.0)
"""Where a fit with ``trust="act"`` looks around θ̂ for a lower cost: each parameter moved
alone by these multiples of its 95 % interval's half-width (4·p rollouts). The intervals are
the Jacobian's promise that the cost rises that far out; a residual with steps (a contact
event that moves from one time step to the next as θ changes) can hold Levenberg–Marquardt
on a step's edge, where the Jacobian of each smooth piece sees a minimum and the data do
not."""

PROBE_GAIN = 1e-3
"""The relative decrease of the cost at a probe that counts as lower (and it must exceed
100·ε of the data's ‖y‖²: below that the costs differ by rounding)."""

PROBE_RESTARTS = 4
"""How many times at most a fit starts again from a lower probe."""


NONLINEARITY = 0.5
"""How far from linear the residuals may be, at :data:`SMOOTHING_SCALE` along each
parameter, for the fit's own switch to multiple shooting to take a window length:
‖r(θ+δ) + r(θ−δ) − 2r(θ)‖ ≤ NONLINEARITY·‖r(θ+δ) − r(θ−δ)‖ (the second difference against the
first: a Gauss–Newton step of that size is predicted by the Jacobian)."""


@eqx.filter_jit
def _second_over_first(problem: _Problem, x):
    p = len(problem.params)
    sig = SMOOTHING_SCALE * jnp.where(x[:p] != 0, jnp.abs(x[:p]), 1.0)

    def ratio(j):
        d = jnp.zeros_like(x).at[j].set(sig[j])
        rp, rm = problem.exact_residuals(x + d), problem.exact_residuals(x - d)
        r0 = problem.exact_residuals(x)
        return jnp.linalg.norm(rp + rm - 2 * r0) / jnp.linalg.norm(rp - rm)

    return jax.vmap(ratio)(jnp.arange(p))


def _full_rank(problem: _Problem, x, p: int, labels, rank_rtol: float) -> bool:
    _, J = _jacobian(problem, jnp.asarray(x))
    sv, V = _scaled_svd(_theta_block(np.asarray(J), p))
    return bool(np.all(np.isfinite(np.asarray(J)))) and not _unidentified(sv, V, labels, rank_rtol)


def _nearly_linear(problem: _Problem, x, count: list[int]) -> bool:
    count[1] += 3 * len(problem.params)  # rollouts
    r = np.asarray(_second_over_first(problem, x))
    return bool(np.all(np.isfinite(r)) and np.all(r <= NONLINEARITY))


def _smoothed(problem: _Problem, x_theta, dtype) -> _Problem:
    """``problem`` fitted with the smoothed Jacobian in θ's columns: column j the derivative
    of the residuals smoothed along θ_j by N(0, σ_j²), σ_j = :data:`SMOOTHING_SCALE`·|θ_j| at
    the point it is switched on (fixed draws: common random numbers)."""
    x = np.asarray(x_theta, dtype=float)
    sigma = SMOOTHING_SCALE * np.where(x != 0, np.abs(x), 1.0)
    eps = jax.random.normal(jax.random.key(1), (len(problem.params), SMOOTHING_DRAWS), dtype)
    return dataclasses.replace(problem, smooth_eps=eps, smooth_sigma=jnp.asarray(sigma, dtype))


def _fit_run(problem, params, x_theta, x0j, scale, extra0, extra_scale, dtype, rtol, atol,
             max_steps):  # fmt: skip
    """One Levenberg–Marquardt solve from physical θ ``x_theta`` (and shooting's starts at
    their guess): (x̂ with the starts, steps, converged, finite, Jacobian mode, θ history,
    cost history)."""
    p_count = len(params)
    n_extra = 0 if extra0 is None else int(extra0.shape[0])
    z0 = jnp.asarray([_to_z(p, float(x), s) for p, x, s in zip(params, x_theta, scale)], dtype)
    if n_extra:
        z0 = jnp.concatenate([z0, jnp.zeros(n_extra, dtype)])
    fit = _Fit(
        problem,
        jnp.asarray([p.lower if math.isfinite(p.lower) else 0.0 for p in params], dtype),
        jnp.asarray([p.upper if math.isfinite(p.upper) else 0.0 for p in params], dtype),
        x0j,
        jnp.asarray(scale, dtype),
        extra0,
        extra_scale,
    )
    rows = int(jax.eval_shape(problem.exact_residuals, fit.physical(z0)).shape[0])
    # forward mode: one tangent per unknown beats one backward pass per residual
    jac = "fwd" if p_count + n_extra <= rows else "bwd"
    z, k, ok, hist_z, hist_c = _solve(fit, z0, rtol, atol, max_steps, jac)
    k = int(k)
    x_hat = np.asarray(fit.physical(z), dtype=float)
    hist_cost = np.asarray(hist_c[:k])
    finite = bool(np.all(np.isfinite(x_hat))) and (k == 0 or bool(np.isfinite(hist_cost[-1])))
    if finite:
        r_hat = _exact_residuals(problem, jnp.asarray(x_hat, dtype))
        finite = bool(jnp.all(jnp.isfinite(r_hat)))
    if not finite:  # never report NaN: the last finite iterate
        good = np.where(np.isfinite(hist_cost))[0]
        start = np.asarray(fit.physical(z0), dtype=float)
        x_hat = np.asarray(fit.physical(hist_z[good[-1]]), dtype=float) if good.size else start
    hist_theta = np.asarray(jax.vmap(fit.physical)(hist_z[:k]))[:, :p_count]
    return x_hat, k, bool(ok) and finite, finite, jac, hist_theta, hist_cost


class _Projected(eqx.Module):
    """``x -> c·r(x)``: a scalar whose gradient is ``Jᵀc``, for the doctor's check."""

    problem: _Problem
    c: Any
    tail: Any = None  # multiple shooting: the start states, held

    def __call__(self, x):
        if self.tail is not None and self.tail.shape[0]:
            x = jnp.concatenate([x, self.tail])
        return jnp.dot(self.c, self.problem.exact_residuals(x))


class _Subset(eqx.Module):
    """``observe`` restricted to the recorded signals, each raveled to a vector."""

    observe: Any
    keys: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, state):
        out = self.observe(state)
        return {k: jnp.ravel(jnp.asarray(out[k])) for k in self.keys}


def _theta_block(J: np.ndarray, p: int) -> np.ndarray:
    """θ's columns of J with what the other unknowns (shooting's start states) can explain
    projected out: the Jacobian whose singular values say what the data pin in θ when the
    starts are fitted too (the Schur complement of JᵀJ)."""
    if J.shape[1] == p:
        return J
    Jt, Js = J[:, :p], J[:, p:]
    coef, *_ = np.linalg.lstsq(Js, Jt, rcond=None)
    return Jt - Js @ coef


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
    flat0, unravel = ravel_pytree(_physical(s0_one))
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
            flat = ravel_pytree(_physical(jax.tree_util.tree_map(lambda a, t=t: a[t], traj)))[0]
            if state_of is not None:
                row = {n: np.asarray(v)[t] for n, v in rec.signals.items()}
                if velocity is not None and "qvel" not in row:
                    row["qvel"] = velocity(rec, t)
                if all(np.all(np.isfinite(v)) for v in row.values()):
                    try:
                        flat = ravel_pytree(_physical(state_of(row)))[0]
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


def _physical(state: Any) -> Any:
    """``state`` without the fields its type names as solver memory (``SOLVER_MEMORY``, e.g.
    an MJX state's warm start): what multiple shooting fits and asks to be continuous."""
    memory = getattr(type(state), "SOLVER_MEMORY", ())
    return state._replace(**dict.fromkeys(memory)) if memory else state


def _with_memory(state: Any, like: Any) -> Any:
    """``state`` (from :func:`_physical`) with its solver memory taken from ``like``."""
    memory = getattr(type(state), "SOLVER_MEMORY", ())
    return state._replace(**{f: getattr(like, f) for f in memory}) if memory else state


def _velocity_from_positions(step: Any, s0: Any, signals: Mapping[str, Any]) -> Any:
    """``(rec, t) -> qvel`` for window starts when the recordings hold ``qpos`` but not
    ``qvel``: the backward difference of the recorded positions, (q_t − q_{t−1})/h
    (MuJoCo's ``mj_differentiatePos`` where a free or ball joint makes nq ≠ nv) — exact for
    semi-implicit Euler (MuJoCo's ``Euler``, which sets q_t = q_{t−1} + h·v_t), a first
    guess otherwise (the starts are fitted). ``None`` where it does not apply (no step size,
    a state that is not an MJX state or an (x, v) pair, or a previous row missing)."""
    if "qpos" not in signals or "qvel" in signals:
        return None
    h = _step_size(step)
    if h is None:
        return None
    model = getattr(step, "mj_model", None)
    if hasattr(s0, "qpos") and hasattr(s0, "qvel"):
        nv = int(np.size(s0.qvel))
    elif isinstance(s0, tuple) and len(s0) == 2:
        nv = int(np.size(s0[1]))
    else:
        return None

    def velocity(rec: Recording, t: int):
        q = np.asarray(rec.signals["qpos"], dtype=float)
        if model is not None and model.nq != model.nv:
            import mujoco

            v = np.zeros(model.nv)
            mujoco.mj_differentiatePos(model, v, h, q[t - 1], q[t])
            return v
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
    if hasattr(s0, "qpos") and hasattr(s0, "qvel") and hasattr(s0, "_replace"):
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


def _covariance(r: np.ndarray, J: np.ndarray, p: int, dof: int, rank_rtol: float) -> np.ndarray:
    """θ's block of s²·(JᵀJ)⁻¹, s² = ‖r‖²/dof (r the data's residuals), through the column-
    normalised Jacobian's SVD with directions below ``rank_rtol`` dropped."""
    s2 = float(r @ r) / dof
    norms = np.linalg.norm(J, axis=0)
    D = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    _, S, Vt = np.linalg.svd(J * D, full_matrices=False)
    keep = S > rank_rtol * (S[0] if S.size and S[0] > 0 else 1.0)
    inv = (Vt.T[:, keep] / S[keep] ** 2) @ Vt[keep]
    return s2 * (D[:, None] * inv * D[None, :])[:p, :p]


def _t_quantile(dof: int) -> float:
    """Student's t quantile of the intervals' :data:`CONFIDENCE`."""
    from scipy import stats  # a dependency of jax

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof))


@eqx.filter_jit
def _costs(problem: _Problem, X):
    """‖r(x)‖² at each row of X: one ``lax.map`` (a scan of the rollout, compiled like one)."""
    return jax.lax.map(lambda x: jnp.sum(problem.exact_residuals(x) ** 2), X)


def _fmt(sv) -> str:
    return "[" + ", ".join(f"{s:.2g}" for s in sv) + "]"


def _check_finite_jacobian(r, J, labels) -> None:
    if not bool(jnp.all(jnp.isfinite(r))):
        raise ValueError("the simulation at the start gives non-finite observations: change it")
    bad = [labels[j] for j in range(J.shape[1]) if not bool(jnp.all(jnp.isfinite(J[:, j])))]
    if bad:
        raise ValueError(f"the Jacobian at the start is not finite for {', '.join(bad)}")


def _scaled_svd(J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Relative singular values (descending) of the column-normalised Jacobian, and V."""
    norms = np.linalg.norm(J, axis=0)
    Jn = J / np.where(norms > 0, norms, 1.0)
    _, S, Vt = np.linalg.svd(Jn, full_matrices=False)
    rel = S / S[0] if S.size and S[0] > 0 else np.zeros_like(S)
    return rel, Vt.T


def _unidentified(sv, V, labels, rank_rtol) -> tuple[str, ...]:
    bad = set()
    for j in np.where(sv < rank_rtol)[0]:
        # the parameters that move along this unseen (unit) direction: the ones with a
        # component above 0.05 (0.25 % of its length squared)
        bad |= {labels[i] for i in np.where(np.abs(V[:, j]) > 0.05)[0]}
    return tuple(n for n in labels if n in bad)
