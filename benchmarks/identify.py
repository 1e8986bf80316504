"""System identification, side by side: ``diffsim.identify`` (Levenberg–Marquardt with the
exact Jacobian through the rollout) against SciPy's ``least_squares`` with finite-difference
Jacobians on the same simulator, residuals, data and starting points — and CMA-ES (``cma``)
as the black-box search, when installed.

    python -m benchmarks.identify [--seeds 5]

Evaluations are counted in rollouts of all recordings: SciPy's 2-point Jacobian costs p
rollouts, diffsim's forward-mode Jacobian p tangents, counted as p rollout-equivalents
(:attr:`diffsim.IdentifyResult.rollout_equivalents`). Wall times are of a warm call (the
simulator compiled once before timing, for every method alike). Medians over the seeds,
with the range.
"""

from __future__ import annotations

import argparse
import math
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

import diffsim  # noqa: E402
from diffsim.systems import bouncing_ball, mass_spring, mass_spring_drive, nonlinear_spring  # noqa: E402


def _task_spring(seed: int):
    sys = nonlinear_spring(h=0.01, m=1.0, k=4.0, k3=0.0, c=0.3, x0=1.0)
    rec = diffsim.identification.simulate_recording(
        sys.step, sys.s0, sys.theta, 400, noise=0.01, key=jax.random.key(seed)
    )
    params = diffsim.identification.parse_parameters(
        "k, c", sys.theta, bounds={"k": (0, 20), "c": (0, 5)}, start={"k": 3.0, "c": 0.5}
    )
    return "mass-spring-damper k, c (σ = 0.01)", sys, rec, params, {"k": 4.0, "c": 0.3}, None


def _task_ball(seed: int):
    sys = bouncing_ball(h=1e-3, y0=1.0, vy0=0.0, g=9.81, e=0.8)
    obs = lambda s: {"qpos": s[0]}  # noqa: E731
    rec = diffsim.identification.simulate_recording(
        sys.step, sys.s0, sys.theta, 2000, observe=obs, noise=0.005, key=jax.random.key(seed)
    )
    params = diffsim.identification.parse_parameters(
        "e, g", sys.theta, bounds={"e": (0, 1), "g": (0, math.inf)}, start={"e": 0.7, "g": 9.0}
    )
    return (
        "bouncing ball e, g (TOI contact, σ = 5 mm)",
        sys,
        rec,
        params,
        {"e": 0.8, "g": 9.81},
        obs,
    )


def _task_chain(seed: int):
    sys = mass_spring(3)
    u = mass_spring_drive(300, 0.01)
    rec = diffsim.identification.simulate_recording(
        sys.step, sys.s0, sys.theta, 300, inputs=u, noise=1e-3, key=jax.random.key(seed)
    )
    start = {f"m[{i}]": 1.2 * float(sys.theta["m"][i]) for i in range(3)}
    start |= {f"k[{i}]": float(sys.theta["k"][i]) / 1.2 for i in range(3)}
    params = diffsim.identification.parse_parameters(
        list(start), sys.theta, bounds=dict.fromkeys(start, (0.0, math.inf)), start=start
    )
    truth = {f"m[{i}]": float(sys.theta["m"][i]) for i in range(3)}
    truth |= {f"k[{i}]": float(sys.theta["k"][i]) for i in range(3)}
    return "driven 3-mass chain, 6 parameters (σ = 1 mm)", sys, rec, params, truth, None


PUSH_XML = """
<mujoco model="pushing-id">
  <option timestep="0.005" integrator="Euler" gravity="0 0 -9.81"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" friction="0.1 0.005 0.0001"/>
    <body name="finger" pos="0 0 0.1">
      <joint name="finger_x" type="slide" axis="1 0 0" damping="2"/>
      <geom name="finger" type="sphere" size="0.05" mass="0.5" contype="2" conaffinity="2"
            priority="1" condim="1"/>
    </body>
    <body name="box" pos="0.5 0 0.1">
      <joint name="box_x" type="slide" axis="1 0 0"/>
      <joint name="box_z" type="slide" axis="0 0 1"/>
      <geom name="box" type="box" size="0.1 0.1 0.1" mass="1" contype="3" conaffinity="3"
            friction="0.5 0.005 0.0001" solref="0.04 1"/>
    </body>
  </worldbody>
  <actuator>
    <position name="finger" joint="finger_x" kp="100" ctrlrange="-1 3" ctrllimited="true"/>
  </actuator>
</mujoco>
"""
"""The contact task: a servoed, frictionless finger (``condim="1"``, with the priority that
makes its contact with the box frictionless) pushes a box over a floor whose friction is below
the box's, so MuJoCo's max-combination of the two is the box's, away from its kink."""

PUSH_TRUTH = {"body_mass:box": 1.0, "geom_friction:box": 0.5, "geom_solref:box": 0.04}
PUSH_START = {"body_mass:box": 1.3, "geom_friction:box": 0.6, "geom_solref:box": 0.05}
PUSH_BOUNDS = {
    "body_mass:box": (0.01, 10.0),
    "geom_friction:box": (0.01, 2.0),
    "geom_solref:box": (0.012, 0.2),  # MuJoCo clamps time constants below 2 h = 0.01 s
}
PUSH_T = 200
PUSH_NOISE = 1e-5  # m: the recording's position noise


def _record_in_mujoco_c(xml: str, ctrl: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """qpos rows 0..T of MuJoCo C's ``mj_step`` at the model's own values (the 'real'
    recording every tool fits), with Gaussian noise on rows 1..T."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    rows = [data.qpos.copy()]
    for u in ctrl:
        data.ctrl[:] = u
        mujoco.mj_step(model, data)
        rows.append(data.qpos.copy())
    qpos = np.array(rows)
    qpos[1:] += noise * np.random.default_rng(seed).standard_normal(qpos[1:].shape)
    return qpos


def _mujoco_c_task(xml: str, ctrl: np.ndarray, spec: dict, noise: float, seed: int, label: str):
    """A task on a MuJoCo model: qpos recorded by MuJoCo C (σ = ``noise``), fitted through the
    MJX adapter; ``spec`` maps each parameter name ("body_mass:box") to its (peer kind,
    attribute, column, start, bounds, truth)."""
    from types import SimpleNamespace

    from diffsim.engines import mjx

    step = mjx.load(xml)
    qpos = _record_in_mujoco_c(xml, ctrl, noise, seed)
    s0 = step.initial_state()
    rec = diffsim.Recording(s0, {"qpos": qpos}, jnp.asarray(ctrl))
    theta = step.theta(*sorted({n.split(":")[0] for n in spec}))
    params = diffsim.identification.parse_parameters(
        list(spec),
        theta,
        model=step.mj_model,
        bounds={n: v[4] for n, v in spec.items()},
        start={n: v[3] for n, v in spec.items()},
    )
    sys = SimpleNamespace(step=step, s0=s0, theta=theta)
    obs = lambda s: {"qpos": s.qpos}  # noqa: E731
    peer = {
        "xml": xml,
        "recordings": [
            {
                "qpos0": qpos[0].tolist(),
                "qvel0": [0.0] * step.mj_model.nv,
                "ctrl": ctrl.tolist(),
                "qpos": qpos.tolist(),
            }
        ],
        "params": [
            {
                "name": n,
                "kind": kind,
                "element": n.split(":")[1],
                "attr": attr,
                "col": col,
                "start": start,
                "lower": bounds[0],
                "upper": bounds[1],
            }
            for n, (kind, attr, col, start, bounds, _) in spec.items()
        ],
        "repeats": 1,
    }
    truth = {n: v[5] for n, v in spec.items()}
    return label, sys, rec, params, truth, obs, peer


def _box_spec() -> dict:
    """The box tasks' parameters (mass, friction, solref): (peer kind, attribute, column,
    start, bounds, truth) by name."""
    return {
        n: (kind, attr, col, PUSH_START[n], PUSH_BOUNDS[n], PUSH_TRUTH[n])
        for n, kind, attr, col in (
            ("body_mass:box", "body", "mass", None),
            ("geom_friction:box", "geom", "friction", 0),
            ("geom_solref:box", "geom", "solref", 0),
        )
    }


def _task_push(seed: int):
    spec = _box_spec()
    ctrl = np.linspace(0.0, 1.0, PUSH_T)[:, None]
    label = f"pushed box: mass, friction, solref (MuJoCo C data, σ = {PUSH_NOISE:g} m)"
    return _mujoco_c_task(PUSH_XML, ctrl, spec, PUSH_NOISE, seed, label)


SLIDE_XML = """
<mujoco model="shoved-box-id">
  <option timestep="0.005" integrator="Euler" gravity="0 0 -9.81"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" friction="0.1 0.005 0.0001"/>
    <body name="box" pos="0 0 0.1">
      <joint name="box_x" type="slide" axis="1 0 0"/>
      <joint name="box_z" type="slide" axis="0 0 1"/>
      <geom name="box" type="box" size="0.1 0.1 0.1" mass="1" friction="0.5 0.005 0.0001"
            solref="0.04 1"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="shove" joint="box_x" ctrlrange="-20 20" ctrllimited="true"/>
  </actuator>
</mujoco>
"""
"""The well-posed contact task: a box set down on a floor (released touching it, so it settles
into its contact) and shoved along it by a known force rising from 0 to 6.3 N over 1 s —
past the 4.9 N that friction holds (μ m g), so it breaks away and slides, at up to 0.16 m/s,
with no finger touching it. Mass (from F = m a), friction (from when and how it breaks
away) and the contact time constant (from how deep it settles) all move its recorded
positions. Even this slowly, MuJoCo's soft friction lifts the sliding box off the floor for
single steps (7 times in its last 40 steps, the first ~4 steps after it breaks away at
step ~156; with every solref, cone and impratio tried): each lift is an event that moves
from one time step to the next as θ changes, a step in the residual."""

SLIDE_FORCE = 6.3  # N at t = 1 s


def _task_slide(seed: int):
    spec = _box_spec()
    ctrl = np.linspace(0.0, SLIDE_FORCE, PUSH_T)[:, None]
    label = f"shoved box: mass, friction, solref (MuJoCo C data, σ = {PUSH_NOISE:g} m)"
    return _mujoco_c_task(SLIDE_XML, ctrl, spec, PUSH_NOISE, seed, label)


CHEETAH_T = 200  # 2 s at gymnasium's h = 0.01 s
CHEETAH_NOISE = 1e-5  # m or rad: the recording's position noise
CHEETAH_FIT = (  # (name, peer kind, attribute): three link masses and two joint dampings
    ("body_mass:torso", "body", "mass"),
    ("body_mass:bthigh", "body", "mass"),
    ("body_mass:fthigh", "body", "mass"),
    ("dof_damping:bthigh", "joint", "damping"),
    ("dof_damping:fthigh", "joint", "damping"),
)


def _task_cheetah(seed: int, noise: float = CHEETAH_NOISE):
    """The legged task: gymnasium's half_cheetah, as shipped, 2 s under random controls
    (each held for 0.1 s, half the actuator range) with its feet hitting the floor; three
    link masses and two joint dampings from the recorded joint positions, from 20 % off,
    bounded to 0.2–5× the truth (mujoco.minimize needs finite bounds)."""
    import mujoco

    from diffsim.engines.control import gymnasium_model

    path = gymnasium_model("half_cheetah")
    with open(path) as f:
        xml = f.read()
    m = mujoco.MjModel.from_xml_string(xml)
    rng = np.random.default_rng(100 + seed)
    ctrl = np.repeat(0.5 * rng.uniform(-1, 1, (CHEETAH_T // 10, m.nu)), 10, axis=0)
    spec = {}
    for name, kind, attr in CHEETAH_FIT:
        element = name.split(":")[1]
        if kind == "body":
            true = float(m.body_mass[m.body(element).id])
        else:
            true = float(m.dof_damping[m.jnt_dofadr[m.joint(element).id]])
        spec[name] = (kind, attr, None, 1.2 * true, (0.2 * true, 5.0 * true), true)
    label = (
        f"half_cheetah (gymnasium, as shipped): 3 masses, 2 dampings from 2 s of joint "
        f"positions (MuJoCo C data, σ = {noise:g})"
    )
    return _mujoco_c_task(xml, ctrl, spec, noise, seed, label)


def _residual_fn(sys, rec, params, observe):
    """The same weighted residuals as identify's, from the public API: one jitted rollout."""
    observe = observe or diffsim.identification.default_observe
    keys = list(rec.signals)
    y = {k: jnp.asarray(np.nan_to_num(np.asarray(rec.signals[k])[1:])) for k in keys}
    T = rec.num_steps

    @jax.jit
    def residuals(x):
        theta = dict(sys.theta)
        for j, p in enumerate(params):
            theta[p.field] = jnp.asarray(theta[p.field]).at[p.index].set(x[j])
        traj = diffsim.rollout(sys.step, rec.s0, theta, T, inputs=rec.inputs, include_initial=False)
        pred = jax.vmap(observe)(traj)
        return jnp.concatenate([(jnp.reshape(pred[k], y[k].shape) - y[k]).ravel() for k in keys])

    return residuals


def _error(est: dict[str, float], truth: dict[str, float]) -> float:
    return max(abs(est[n] - v) / abs(v) for n, v in truth.items())


CMA_MAX_ROLLOUTS = {"cheetah": 1000}
"""CMA-ES's budget where 2,000 generations would take an hour (a 2 s rollout of the legged
model costs ~0.15 s here): it stops at this many rollouts, and its row says so."""


def run_task(
    make, seeds: int, cma_max: int | None = None
) -> dict[str, list[tuple[float, float, float, float]]]:
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    name = verdict = ""
    for seed in range(seeds):
        # every seed's MuJoCo task loads its own step, so its programs compile anew; the
        # compiled programs kept from earlier seeds each hold memory maps (~20,000 per push
        # seed), and a run of several MJX tasks reached the kernel's 65,530 and died in LLVM
        jax.clear_caches()
        name, sys, rec, params, truth, observe, *rest = make(seed)
        peer = rest[0] if rest else None
        names = [p.label for p in params]
        # the fit alone (trust="off": no finite-difference check of the Jacobian, which SciPy
        # does not do either), then the fit as a user runs it (trust="act", the default: the
        # doctor's check at the start and at θ̂, 11·p + 1 rollouts each, and its remedy —
        # multiple shooting or the smoothed Jacobian — where it does not trust the exact one)
        kw: dict = {} if observe is None else {"observe": observe}
        for trust, label in (
            ("off", "diffsim.identify (exact Jacobian, LM; trust='off')"),
            ("act", "diffsim.identify (default trust='act': the doctor's checks and remedy)"),
        ):
            diffsim.identify(sys.step, rec, sys.theta, params, trust=trust, **kw)  # compile
            res = diffsim.identify(sys.step, rec, sys.theta, params, trust=trust, **kw)
            rows.setdefault(label, []).append(
                (_error(res.theta, truth), res.residual, res.rollout_equivalents, res.seconds)
            )
            if seed == 0 and trust == "act":
                trusted = {True: "trusted", False: "NOT trusted", None: "not checked"}
                verdict = (
                    f"seed 0, trust='act': exact Jacobian at θ̂ "
                    f"{trusted[res.jacobian_trusted]}; the fit used the {res.jacobian} "
                    f"Jacobian, {res.windows} window(s); actions: "
                    f"{'; '.join(res.actions) or 'none'}; converged={res.converged}; "
                    f"residual RMS {res.residual:.4g}"
                )
        f = _residual_fn(sys, rec, params, observe)
        x0 = np.array([p.start for p in params])
        lo = np.array([p.lower for p in params])
        hi = np.array([p.upper for p in params])
        count = [0]

        def fun(x, f=f, count=count):
            count[0] += 1
            return np.asarray(f(jnp.asarray(x)))

        fun(x0)  # compile
        for method in ("trf", "lm"):
            count[0] = 0
            t = time.perf_counter()
            if method == "lm":  # MINPACK's LM: no bounds
                sol = least_squares(fun, x0, method="lm", xtol=1e-8, ftol=1e-8)
            else:
                sol = least_squares(fun, x0, bounds=(lo, hi), method="trf", xtol=1e-8, ftol=1e-8)
            dt = time.perf_counter() - t
            est = dict(zip(names, map(float, sol.x)))
            rms = float(np.sqrt(np.mean(sol.fun**2)))
            label = f"SciPy least_squares {method} (2-point FD)"
            rows.setdefault(label, []).append((_error(est, truth), rms, count[0], dt))
        if peer is not None:
            from benchmarks import _sysid_env

            for row in _sysid_env.run(peer):
                rows.setdefault(row["method"], []).append(
                    (_error(row["theta"], truth), row["residual_rms"], row["rollouts"],
                     row["seconds"])
                )  # fmt: skip
        import cma  # type: ignore[import-not-found]  # checked in main()

        count[0] = 0
        t = time.perf_counter()
        # CMA-ES in coordinates relative to the start (σ₀ = 10 % of each parameter), so
        # parameters of different scales (a mass, a 0.02 s time constant) are searched alike
        es = cma.CMAEvolutionStrategy(
            np.ones_like(x0),
            0.1,
            {"bounds": [lo / x0, hi / x0], "verbose": -9, "seed": seed + 1}
            | ({} if cma_max is None else {"maxfevals": cma_max}),
        )
        es.optimize(lambda z, x0=x0: float(np.sum(fun(z * x0) ** 2)), iterations=2000)
        dt = time.perf_counter() - t
        xb = es.result.xbest * x0
        est = dict(zip(names, map(float, xb)))
        rms = float(np.sqrt(np.mean(np.asarray(f(jnp.asarray(xb))) ** 2)))  # not counted
        cma_label = "CMA-ES (cma)" + ("" if cma_max is None else f", stopped at {cma_max} rollouts")
        rows.setdefault(cma_label, []).append((_error(est, truth), rms, count[0], dt))
    print(f"\n## {name}\n")
    print(verdict + "\n")
    print("| method | max rel. parameter error | residual RMS | rollouts | wall s |")
    print("|---|---|---|---|---|")
    base = None
    for label, vals in rows.items():
        a = np.array(vals)
        med = np.median(a, axis=0)
        if base is None:
            base = med

        def cell(j, fmt, med=med, a=a):
            return (
                f"{format(med[j], fmt)} ({format(a[:, j].min(), fmt)}–{format(a[:, j].max(), fmt)})"
            )

        print(
            f"| {label} | {cell(0, '.2e')} | {cell(1, '.4g')} | {cell(2, '.0f')} "
            f"(×{med[2] / base[2]:.2f}) | {cell(3, '.3f')} (×{med[3] / base[3]:.2f}) |"
        )
    return rows


def figure(path: str) -> None:
    """The guide's figure: the bouncing ball's noisy heights, the simulation at the start
    and at the fit, and the cost and parameters over the iterations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, sys, rec, params, truth, obs = _task_ball(0)
    res = diffsim.identify(sys.step, rec, sys.theta, params, observe=obs)
    t = np.asarray(rec.time)
    start = dict(sys.theta, e=jnp.asarray(params[0].start), g=jnp.asarray(params[1].start))
    y0 = diffsim.rollout(sys.step, rec.s0, start, rec.num_steps)[0]
    y1 = diffsim.rollout(sys.step, rec.s0, res.theta_full, rec.num_steps)[0]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(
        t[::10],
        np.asarray(rec.signals["qpos"])[::10, 0],
        ".",
        ms=3,
        c="0.5",
        label="recorded (σ = 5 mm)",
    )
    ax[0].plot(t, y0, "--", c="tab:red", label="start: e = 0.7, g = 9.0")
    ax[0].plot(
        t, y1, c="tab:blue", label=f"fit: e = {res.theta['e']:.4f}, g = {res.theta['g']:.3f}"
    )
    ax[0].set(xlabel="t (s)", ylabel="height y (m)", title="observed vs simulated")
    ax[0].legend(fontsize=8)
    k = np.arange(len(res.history["cost"]))
    ax[1].semilogy(k, res.history["cost"], "o-")
    ax[1].set(xlabel="Levenberg–Marquardt step", ylabel="cost ½‖r‖²", title="cost")
    for j, (n, v) in enumerate(truth.items()):
        ax[2].plot(k, res.history["theta"][:, j] / v, "o-", label=f"{n} / true {n}")
    ax[2].axhline(1.0, c="k", lw=0.8)
    ax[2].set(xlabel="Levenberg–Marquardt step", ylabel="estimate / truth", title="parameters")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    print(res)


PUSH_SWEEP = (0.99, 0.995, 0.999, 1.001, 1.005, 1.01, 1.1, 1.3)


def push_sweep() -> None:
    """The push task's landscape in MuJoCo C: each parameter scaled alone, noise-free, the
    RMS of the qpos difference from the truth's trajectory (what a fit's residual would be
    on noise-free data), and the steps on which the box touches the floor with fewer than
    its 4 corners (a hop)."""
    import mujoco

    base = mujoco.MjModel.from_xml_string(PUSH_XML)
    ctrl = np.linspace(0.0, 1.0, PUSH_T)[:, None]

    def run(scale: dict[str, float]):
        m = mujoco.MjModel.from_xml_string(PUSH_XML)
        b, g = m.body("box").id, m.geom("box").id
        m.body_mass[b] *= scale.get("body_mass:box", 1.0)
        m.geom_friction[g, 0] *= scale.get("geom_friction:box", 1.0)
        m.geom_solref[g, 0] *= scale.get("geom_solref:box", 1.0)
        d = mujoco.MjData(m)
        rows, hops = [], 0
        for u in ctrl:
            d.ctrl[:] = u
            mujoco.mj_step(m, d)
            rows.append(d.qpos.copy())
            floor = sum(
                1
                for c in d.contact[: d.ncon]
                if {int(c.geom1), int(c.geom2)} == {base.geom("floor").id, base.geom("box").id}
            )
            hops += floor < 4
        return np.array(rows), hops

    # the hop is MuJoCo's soft friction, not this scene's finger: the same box with a free
    # joint, at rest on the floor, thrown along x (no finger, any solref) leaves the floor
    free = PUSH_XML.replace(
        '<joint name="box_x" type="slide" axis="1 0 0"/>\n'
        '      <joint name="box_z" type="slide" axis="0 0 1"/>',
        '<freejoint name="box"/>',
    )
    assert free != PUSH_XML
    for speed in (0.3, 1.0):
        m = mujoco.MjModel.from_xml_string(free)
        d = mujoco.MjData(m)
        a, va = m.jnt_qposadr[m.joint("box").id], m.jnt_dofadr[m.joint("box").id]
        for _ in range(200):  # 1 s to come to rest
            mujoco.mj_step(m, d)
        rest = float(d.qpos[a + 2])
        d.qvel[va] = speed
        lift, off = 0.0, 0
        for _ in range(200):
            mujoco.mj_step(m, d)
            lift = max(lift, float(d.qpos[a + 2]) - rest)
            off += d.ncon < 4
        print(f"a free box thrown at {speed:g} m/s (no finger): lifts {lift * 1e3:.2f} mm, "
              f"fewer than 4 corners down on {off} of 200 steps")  # fmt: skip
    q0, hops = run({})
    print(f"push task, MuJoCo C, T = {PUSH_T}: the box touches the floor with fewer than 4 "
          f"corners on {hops} of {PUSH_T} steps at the truth")  # fmt: skip
    print("RMS qpos difference from the truth's trajectory (m), one parameter scaled:")
    print("parameter          " + " ".join(f"{r:>9g}" for r in PUSH_SWEEP))
    for name in PUSH_TRUTH:
        cells = [np.sqrt(np.mean((run({name: r})[0] - q0) ** 2)) for r in PUSH_SWEEP]
        print(f"{name:<18} " + " ".join(f"{c:9.2e}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tasks", default="spring,ball,chain,push,slide,cheetah")
    parser.add_argument("--figure", help="write the guide's figure (a .png path) and stop")
    parser.add_argument(
        "--push-sweep", action="store_true", help="print the push task's landscape and stop"
    )
    args = parser.parse_args()
    if args.figure:
        figure(args.figure)
        return
    if args.push_sweep:
        push_sweep()
        return
    try:
        import cma  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        raise SystemExit(
            "benchmarks.identify compares with CMA-ES: pip install 'cma>=4.0' (in the bench "
            "extra: pip install -e '.[bench]')"
        ) from None
    tasks = {
        "spring": _task_spring,
        "ball": _task_ball,
        "chain": _task_chain,
        "push": _task_push,
        "slide": _task_slide,
        "cheetah": _task_cheetah,
    }
    print(
        f"diffsim {diffsim.__version__}, jax {jax.__version__}, {args.seeds} seeds; medians (range)"
    )
    for name in args.tasks.split(","):
        run_task(tasks[name], args.seeds, CMA_MAX_ROLLOUTS.get(name))


if __name__ == "__main__":
    main()
