"""MuJoCo 4.0's system-identification toolbox, ``mujoco.sysid``, as a peer of ``diffsim.identify``.

Runs inside ``.venv-sysid`` (see ``_sysid_env.py``), never in the main environment: it
imports only mujoco, mujoco.sysid, numpy, scipy and the standard library.

    python _sysid_peer.py SPEC.json OUT.json

SPEC.json::

    {"xml": "<mujoco>...</mujoco>",
     "recordings": [{"qpos0": [nq], "qvel0": [nv], "ctrl": [[nu]] * T, "qpos": [[nq]] * (T + 1)}],
     "params": [{"name": "body_mass:box", "kind": "body", "element": "box", "attr": "mass",
                 "col": null, "start": 1.3, "lower": 0.01, "upper": 10.0}, ...],
     "repeats": 1,                                   # optional; seconds are the median
     "optimizers": ["mujoco", "scipy", "scipy_parallel_fd"]}   # optional; these by default
                                 # an entry may also be {"optimizer": "mujoco", "method": label,
                                 #   "kwargs": {"x_scale": "jac"}}: keywords for sysid.optimize

``qpos`` row 0 is ``qpos0``; rows 1..T are the recorded positions after each step, the
targets. Supported parameters (anything else raises ``ValueError`` naming it):

    body      mass                       (sysid.body_inertia_param, InertiaType.Mass: mass
                                          only, the inertia kept; the body made explicit)
    geom      friction[col 0-2], solref[col 0-1], solimp[col 0-4], margin, gap
    joint     damping, stiffness (the linear coefficient, MjsJoint's element 0),
              armature, frictionloss, springref
    actuator  kp (sysid.apply_pgain), kv (sysid.apply_dgain)

OUT.json: a list of rows, one per optimizer, each ``{"method", "theta", "residual_rms",
"rollouts", "seconds", "iterations", "note"}``.

How the toolbox is driven, as its own tests and docstrings show a user doing it:
``sysid.ModelSequences`` (the model spec, initial states, control and measured sensor
``TimeSeries``), ``sysid.build_residual_fn`` and ``sysid.optimize`` with each backend's
defaults (``optimizer="mujoco"``: MuJoCo's own bounded Levenberg–Marquardt,
``mujoco.minimize.least_squares``; ``"scipy"``: ``scipy.optimize.least_squares``, TRF with
its own 2-point Jacobian; ``"scipy_parallel_fd"``: the same with MuJoCo's batched
finite-difference Jacobian). Two choices make the objective the benchmark's plain sum of
squared qpos residuals:

* The toolbox fits sensor data, so every joint gets a ``jointpos`` sensor (added with
  ``MjSpec``; existing sensors are dropped) and the sensor data equal qpos. MuJoCo computes
  sensors before it integrates, so after step k the sensors read the state before it: the
  toolbox's rollout runs T + 1 steps (the last control repeated) and its samples 1..T are
  qpos rows 1..T, matched on exactly the rollout's own time stamps (no interpolation).
* The toolbox's default residual divides each sensor's column by its measured norm / √2;
  ``sysid.SignalTransform(normalize=False)``, passed as ``modify_residual``, is its own
  switch for the unnormalized residual (measured − simulated, uniform weights).

Rollouts are counted by wrapping the residual function: one rollout per column of the
parameter array it is called with (the toolbox rolls the finite-difference columns out as a
batch through ``mujoco.rollout``; each column is one rollout of every recording).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

# This file sits beside benchmarks/mujoco.py, which would shadow the mujoco package when the
# file is run as a script (its folder is then sys.path[0]).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import sysid  # noqa: E402

OPTIMIZERS = {
    "mujoco": "mujoco.sysid (default optimizer)",
    "scipy": "mujoco.sysid (scipy least_squares, 2-point FD)",
    "scipy_parallel_fd": "mujoco.sysid (scipy least_squares, MuJoCo batched FD)",
}

_GEOM_ARRAYS = {"friction": 3, "solref": 2, "solimp": 5}
_GEOM_SCALARS = ("margin", "gap")
_JOINT_ARRAYS = ("damping", "stiffness")  # MuJoCo 4: [linear, higher-order...] coefficients
_JOINT_SCALARS = ("armature", "frictionloss", "springref")


# ----------------------------------------------------------------------------- the model


def _explicit_inertials(spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
    """Every body's compiled mass, inertia and their frame written into the spec as explicit
    inertials (and ``settotalmass`` switched off), so a fitted mass changes that body's
    mass alone, the inertia kept — as in the adapter's ``body_mass`` — also for models whose
    inertials come from their geoms and a total-mass rescaling (gymnasium's half_cheetah:
    there, making one body explicit leaves it without inertia, which MuJoCo refuses). The
    compiled model is unchanged (checked)."""
    for b in range(1, model.nbody):
        body = spec.body(model.body(b).name) if model.body(b).name else spec.bodies[b]
        body.explicitinertial = True
        body.mass = float(model.body_mass[b])
        body.ipos = model.body_ipos[b].copy()
        body.iquat = model.body_iquat[b].copy()
        body.inertia = model.body_inertia[b].copy()
        body.fullinertia = np.full(6, np.nan)
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.settotalmass = -1.0
    again = spec.compile()
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat"):
        if not np.allclose(getattr(again, field), getattr(model, field), rtol=1e-12, atol=1e-15):
            raise RuntimeError(f"explicit inertials changed {field}")


def _with_qpos_sensors(xml: str) -> mujoco.MjSpec:
    """The model's spec with its sensors replaced by one ``jointpos`` sensor per joint."""
    spec = mujoco.MjSpec.from_string(xml)
    for s in list(spec.sensors):
        spec.delete(s)
    model = spec.compile()
    _explicit_inertials(spec, model)
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in (
            int(mujoco.mjtJoint.mjJNT_SLIDE),
            int(mujoco.mjtJoint.mjJNT_HINGE),
        ):
            raise ValueError(
                f"joint {model.joint(j).name or j!r} is a ball or free joint: the mujoco.sysid "
                "peer observes qpos through jointpos sensors, for hinge and slide joints only"
            )
    if list(np.argsort(model.jnt_qposadr, kind="stable")) != list(range(model.njnt)):
        raise ValueError("joints are not in qpos order")  # never for compiled models
    for i, js in enumerate(spec.joints):
        if not js.name:
            js.name = f"_sysid_joint{i}"
        s = spec.add_sensor()
        s.name = f"{js.name}_pos"
        s.type = mujoco.mjtSensor.mjSENS_JOINTPOS
        s.objtype = mujoco.mjtObj.mjOBJ_JOINT
        s.objname = js.name
    model = spec.compile()
    # the sensors read qpos exactly, in qpos order
    data = mujoco.MjData(model)
    data.qpos[:] = np.random.default_rng(0).uniform(-0.5, 0.5, model.nq)
    mujoco.mj_forward(model, data)
    if model.nsensordata != model.nq or not np.array_equal(data.sensordata, data.qpos):
        raise RuntimeError("jointpos sensors do not reproduce qpos")
    return spec


def _parameter(spec: mujoco.MjSpec, model: mujoco.MjModel, p: dict) -> sysid.Parameter:
    name, kind, el, attr, col = p["name"], p["kind"], p["element"], p["attr"], p.get("col")
    what = f"parameter {name!r} ({kind} {el!r} {attr}" + ("" if col is None else f"[{col}]") + ")"

    def need(obj):
        if obj is None:
            raise ValueError(f"{what}: no {kind} named {el!r} in the model")
        return obj

    def set_col(get, size):
        c = 0 if col is None else int(col)
        if not 0 <= c < size:
            raise ValueError(f"{what}: column {col} out of range 0..{size - 1}")

        def modifier(s, prm, get=get, c=c):
            obj = get(s)
            arr = np.array(getattr(obj, attr), dtype=float)
            arr[c] = prm.value[0]
            setattr(obj, attr, arr)

        return modifier

    def set_scalar(get):
        if col not in (None, 0):
            raise ValueError(f"{what}: {attr} is a scalar, col must be null")

        def modifier(s, prm, get=get):
            setattr(get(s), attr, float(prm.value[0]))

        return modifier

    if kind == "body":
        need(spec.body(el))
        if attr != "mass" or col not in (None, 0):
            raise ValueError(f"{what}: only body mass is supported")
        # body_inertia_param's own modifier for InertiaType.Mass hands MjsBody.mass a
        # 1-element array, which mujoco 4.0.0 rejects (TypeError); the same toolbox function
        # it calls, given the float:
        par = sysid.body_inertia_param(
            spec,
            model,
            el,
            inertia_type=sysid.InertiaType.Mass,
            param_name=name,
            modifier=lambda s, prm, el=el: sysid.model_modifier.apply_body_mass_ipos(
                s, el, mass=float(prm.value[0])
            ),
        )
    elif kind == "geom":
        need(spec.geom(el))
        get = lambda s, el=el: s.geom(el)  # noqa: E731
        if attr in _GEOM_ARRAYS:
            modifier = set_col(get, _GEOM_ARRAYS[attr])
        elif attr in _GEOM_SCALARS:
            modifier = set_scalar(get)
        else:
            raise ValueError(f"{what}: unsupported geom attribute {attr!r}")
        par = sysid.Parameter(name, 0.0, 0.0, 1.0, modifier=modifier)
    elif kind == "joint":
        need(spec.joint(el))
        get = lambda s, el=el: s.joint(el)  # noqa: E731
        if attr in _JOINT_ARRAYS:
            if col not in (None, 0):
                raise ValueError(f"{what}: only the linear {attr} coefficient (col 0) is supported")
            modifier = set_col(get, 1)
        elif attr in _JOINT_SCALARS:
            modifier = set_scalar(get)
        else:
            raise ValueError(f"{what}: unsupported joint attribute {attr!r}")
        par = sysid.Parameter(name, 0.0, 0.0, 1.0, modifier=modifier)
    elif kind == "actuator":
        need(spec.actuator(el))
        fns = {"kp": sysid.apply_pgain, "kv": sysid.apply_dgain}
        if attr not in fns or col not in (None, 0):
            raise ValueError(f"{what}: only actuator kp and kv (position actuators) are supported")
        fn = fns[attr]
        par = sysid.Parameter(
            name, 0.0, 0.0, 1.0, modifier=lambda s, prm, fn=fn, el=el: fn(s, el, prm.value[0])
        )
    else:
        raise ValueError(f"{what}: unsupported parameter kind {kind!r}")
    start, lo, hi = float(p["start"]), float(p["lower"]), float(p["upper"])
    if not lo < hi:
        raise ValueError(f"{what}: lower bound {lo} is not below upper bound {hi}")
    par.nominal = np.atleast_1d(start)
    par.value = np.atleast_1d(start)
    par.min_value = np.atleast_1d(lo)
    par.max_value = np.atleast_1d(hi)
    return par


def _params(spec: mujoco.MjSpec, specs: list[dict]) -> sysid.ParameterDict:
    model = spec.compile()
    out = sysid.ParameterDict()
    for p in specs:
        if p["name"] in out:
            raise ValueError(f"parameter {p['name']!r} given twice")
        out.add(_parameter(spec, model, p))
    return out


# ------------------------------------------------------------------------------ the data


def _control_series(ctrl: np.ndarray, h: float) -> sysid.TimeSeries:
    """T controls, the last repeated twice: the toolbox drops a control series' last sample
    and applies the rest, here T + 1 steps, at the model's time step."""
    data = np.vstack([ctrl, ctrl[-1:], ctrl[-1:]])
    n = len(data)
    times = np.arange(n) * h
    # The residual resamples controls at the model's time step (np.linspace over the span):
    # make sure that is the identity, not one sample more from rounding.
    while int(np.ceil((times[-1] - times[0]) / h)) + 1 != n:
        times[-1] = np.nextafter(times[-1], -np.inf)
    ts = sysid.TimeSeries(times, data)
    back = ts.resample(target_dt=h)
    if back.data.shape != data.shape or not np.allclose(back.data, data, rtol=0, atol=1e-12):
        raise RuntimeError("control resampling at the time step is not the identity")
    return ts


def _sequences(spec: mujoco.MjSpec, recordings: list[dict]) -> sysid.ModelSequences:
    model = spec.compile()
    h = float(model.opt.timestep)
    names, states, controls, sensors = [], [], [], []
    for i, rec in enumerate(recordings):
        qpos = np.asarray(rec["qpos"], dtype=float).reshape(-1, model.nq)
        ctrl = np.asarray(rec["ctrl"], dtype=float).reshape(-1, model.nu)
        T = len(ctrl)
        if len(qpos) != T + 1:
            raise ValueError(f"recording {i}: {len(qpos)} qpos rows for {T} controls (need T+1)")
        qpos0 = np.asarray(rec["qpos0"], dtype=float)
        qvel0 = np.asarray(rec["qvel0"], dtype=float)
        # the rollout's own time stamps: MuJoCo adds the time step each step
        t, stamps = 0.0, []
        for _ in range(T + 1):
            t += h
            stamps.append(t)
        names.append(f"recording{i}")
        states.append(sysid.create_initial_state(model, qpos0, qvel0))
        controls.append(_control_series(ctrl, h))
        # sensors after step k read the state before it: qpos row k at the stamp of step k+1
        sensors.append(sysid.TimeSeries.from_names(np.array(stamps[1:]), qpos[1:], model))
    return sysid.ModelSequences("peer", spec, names, states, controls, sensors)


def _qpos_rms(xml: str, params: sysid.ParameterDict, recordings: list[dict]) -> float:
    """RMS of simulated − recorded qpos (rows 1..T, all joints) by plain mj_step."""
    # the spec the fit ran on (explicit inertials: a mass modifier changes that body alone)
    model = sysid.apply_param_modifiers(params, _with_qpos_sensors(xml))
    sq, n = 0.0, 0
    for rec in recordings:
        data = mujoco.MjData(model)
        data.qpos[:] = rec["qpos0"]
        data.qvel[:] = rec["qvel0"]
        target = np.asarray(rec["qpos"], dtype=float).reshape(-1, model.nq)
        for k, u in enumerate(np.asarray(rec["ctrl"], dtype=float).reshape(-1, model.nu)):
            data.ctrl[:] = u
            mujoco.mj_step(model, data)
            d = data.qpos - target[k + 1]
            sq += float(d @ d)
            n += d.size
    return float(np.sqrt(sq / n))


# ----------------------------------------------------------------------------- the fits


def _fit(spec_in: dict, optimizer: str, kwargs: dict) -> tuple:
    """One sysid.optimize call from scratch: (theta, seconds, rollouts, iterations, how,
    fitted ParameterDict). The set-up (spec, parameters, data, residual) is not timed."""
    spec = _with_qpos_sensors(spec_in["xml"])
    params = _params(spec, spec_in["params"])
    ms = _sequences(spec, spec_in["recordings"])
    transform = sysid.SignalTransform(normalize=False)
    residual_fn = sysid.build_residual_fn(models_sequences=[ms], modify_residual=transform.apply)
    count = [0]

    def counted(x, prm, **kw):
        x = np.asarray(x)
        count[0] += 1 if x.ndim == 1 else int(x.shape[1])
        return residual_fn(x, prm, **kw)

    t0 = time.perf_counter()
    opt_params, result = sysid.optimize(
        initial_params=params, residual_fn=counted, optimizer=optimizer, **kwargs
    )
    seconds = time.perf_counter() - t0
    if optimizer == "mujoco":
        # the trace holds one entry per iteration plus the end point
        objective = (getattr(result, "extras", None) or {}).get("objective")
        iterations = None if objective is None else len(objective) - 1
        how = "iterations: mujoco.minimize's (its trace less the end point)"
    else:
        njev = getattr(result, "njev", None)
        iterations = None if njev is None else int(njev)
        how = (
            f"iterations: SciPy's Jacobian evaluations (it counts no iterations); its nfev "
            f"{getattr(result, 'nfev', '?')}, stop: {getattr(result, 'message', '?')}"
        )
    theta = {n: float(opt_params[n].value[0]) for n in opt_params.keys()}
    return theta, seconds, count[0], iterations, how, opt_params


_EXTRA = {
    "mujoco": "the backend's verbose defaults to True (sysid.optimize's own verbose argument "
    "shadows it, so a caller cannot turn it off): mujoco.minimize prints every iteration and "
    "finite-differences one more Jacobian at the end point ({p} of the rollouts)",
    "scipy": "SciPy's own 2-point Jacobian, the residual called one point at a time",
    "scipy_parallel_fd": "mujoco.minimize.jacobian_fd's batched Jacobian, which re-evaluates "
    "the residual at the point itself (one rollout more per Jacobian)",
}


def _entries(spec_in: dict) -> list[tuple[str, str, dict]]:
    out = []
    for e in spec_in.get("optimizers", list(OPTIMIZERS)):
        if isinstance(e, str):
            e = {"optimizer": e}
        opt = e.get("optimizer")
        if opt not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {opt!r}; expected one of {list(OPTIMIZERS)}")
        kwargs = dict(e.get("kwargs") or {})
        label = e.get("method") or OPTIMIZERS[opt] + (
            "" if not kwargs else " " + ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        )
        out.append((opt, label, kwargs))
    return out


def run(spec_in: dict) -> list[dict]:
    repeats = max(1, int(spec_in.get("repeats", 1)))
    entries = _entries(spec_in)
    p = len(spec_in["params"])
    threads = os.cpu_count() or 1
    rows = []
    for opt, label, kwargs in entries:
        times = []
        for _ in range(repeats):
            theta, seconds, rollouts, iterations, how, opt_params = _fit(spec_in, opt, kwargs)
            times.append(seconds)
        rms = _qpos_rms(spec_in["xml"], opt_params, spec_in["recordings"])
        settings = (
            "all defaults (max_iters 200, tolerances 1e-8, no x_scale)"
            if not kwargs
            else "defaults but " + ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        )
        note = (
            f"sysid.optimize(optimizer={opt!r}), {settings}. Residual: a jointpos sensor per "
            f"joint (sensor data = qpos), SignalTransform(normalize=False) as modify_residual "
            f"(plain measured − simulated, uniform weights; by default the toolbox divides each "
            f"sensor's column by its measured norm/√2). Rollouts: counted by wrapping the "
            f"residual function, one per parameter column it is called with (a batched "
            f"finite-difference call, rolled out through mujoco.rollout, counts each perturbed "
            f"trajectory); one rollout = every recording, T+1 steps (sensors read the state "
            f"before each step); each one recompiles the MjSpec. "
            + _EXTRA[opt].format(p=p)[0].upper()
            + _EXTRA[opt].format(p=p)[1:]
            + f". {how}. n_threads {threads} (the toolbox's default, os.cpu_count()). "
            f"Seconds: the optimize call alone"
            + (f", median of {repeats}" if repeats > 1 else "")
            + "."
        )
        rows.append(
            {
                "method": label,
                "theta": theta,
                "residual_rms": rms,
                "rollouts": rollouts,
                "seconds": statistics.median(times),
                "iterations": iterations,
                "note": note,
            }
        )
    return rows


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} SPEC.json OUT.json")
    with open(argv[1]) as f:
        spec_in = json.load(f)
    rows = run(spec_in)
    with open(argv[2], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
