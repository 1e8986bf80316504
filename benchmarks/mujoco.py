"""Gradients of MuJoCo rollouts on gymnasium's models: the MJX adapter, MJX alone, MuJoCo C.

For each model of the zoo (gymnasium's MuJoCo XMLs, loaded unchanged), from a state reached
by simulating it in MuJoCo C with random controls (contacts active), the loss is
``L(qvel0) = w · qvel_T`` after T steps (fixed random w, the model's controls held), and its
gradient with respect to the initial velocity is taken by

* **adapter**: ``jax.grad`` through ``diffsim.engines.mjx`` (the converged solve's
  implicit-function derivative), for 1 world and batches of worlds (``vmap``);
* **mjx iterations=1**: ``jax.grad`` through a ``lax.scan`` of ``mjx.step`` with
  ``opt.iterations = 1``, the reverse mode MJX documents (Euler models only: MJX's own
  ``mjx.step`` integrates RK4 with its ``while_loop`` solve, which reverse mode refuses);
* **C chained mjd_transitionFD**: MuJoCo C's one-step Jacobians (``mjd_transitionFD``,
  centred differences) at each of the T states, multiplied backwards — what a MuJoCo C
  user differentiates a rollout with; many worlds on all cores (a thread each); MuJoCo
  refuses it on RK4 models ("mjd_transitionFD: RK4 integrator is not supported");
* **C central differences**: 2·nv rollouts of T ``mj_step`` (ε = 1e-6, solver run to
  convergence; a PGS model's by Newton, which converges to the same solution), the
  reference every error is measured against.

Compile and run times are reported separately (run: median of 3 after the first call).

    python -m benchmarks.mujoco [--models hopper,ant] [--steps 100] [--worlds 1,64,1024]

float64 (the comparison with MuJoCo C needs it).
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from diffsim.engines import mjx  # noqa: E402
from diffsim.engines.control import gymnasium_model  # noqa: E402
from diffsim.engines.mjx import mj_model_from  # noqa: E402

from ._harness import first_and_median  # noqa: E402

mujoco_mjx = mjx.mjx  # MuJoCo MJX, which the adapter imports without its Warp probe's prints

MODELS = ["hopper", "half_cheetah", "walker2d", "ant", "humanoid"]
CONTACT_STEPS = {"hopper": 100, "half_cheetah": 60, "walker2d": 100, "ant": 40, "humanoid": 60}
EPS = 1e-6


def _timed(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, float]:
    """(compilation: the first call less a run, the median run), seconds."""
    first, run = first_and_median(fn, repeats)
    return first - run, run


def _start(m: mujoco.MjModel, steps: int) -> mujoco.MjData:
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        d.ctrl[:] = 0.3 * rng.uniform(-1, 1, m.nu) * m.actuator_ctrlrange[:, 1]
        mujoco.mj_step(m, d)
    return d


def _c_gradient(m: mujoco.MjModel, d0: mujoco.MjData, w: np.ndarray, T: int) -> np.ndarray:
    ref = copy.deepcopy(m)
    ref.opt.tolerance = 0.0
    if int(ref.opt.solver) == int(mujoco.mjtSolver.mjSOL_PGS):
        # the converged solution, as the adapter's (PGS stops after opt.iterations, short of
        # it: on the humanoid the reference would be 1.2e-5 off)
        ref.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON

    def loss(qvel0):
        d = mujoco.MjData(ref)
        d.qpos[:], d.qvel[:], d.ctrl[:] = d0.qpos, qvel0, d0.ctrl
        d.qacc_warmstart[:] = d0.qacc_warmstart
        for _ in range(T):
            mujoco.mj_step(ref, d)
        return float(w @ d.qvel)

    g = np.zeros(m.nv)
    for k in range(m.nv):
        e = np.zeros(m.nv)
        e[k] = EPS
        g[k] = (loss(d0.qvel + e) - loss(d0.qvel - e)) / (2 * EPS)
    return g


def _c_transition_fd_gradient(m: mujoco.MjModel, d0: mujoco.MjData, w: np.ndarray, T: int):
    """The gradient MuJoCo C gives a user who chains its one-step Jacobians: T calls of
    ``mjd_transitionFD`` (centred, ε = 1e-6) along the rollout, then the adjoint recursion
    λ_t = A_tᵀ λ_{t+1} from λ_T = ∂L/∂x_T; the qvel block of λ_0 is ∂L/∂qvel0. (State in
    MuJoCo's tangent coordinates: dq (nv), qvel (nv), act (na).)"""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = d0.qpos, d0.qvel, d0.ctrl
    d.qacc_warmstart[:] = d0.qacc_warmstart
    nx = 2 * m.nv + m.na
    A = np.zeros((T, nx, nx))
    for t in range(T):
        mujoco.mjd_transitionFD(m, d, EPS, True, A[t], None, None, None)
        mujoco.mj_step(m, d)
    lam = np.zeros(nx)
    lam[m.nv : 2 * m.nv] = w
    for t in range(T - 1, -1, -1):
        lam = A[t].T @ lam
    return lam[m.nv : 2 * m.nv]


def _c_transition_fd_worlds(m: mujoco.MjModel, d0: mujoco.MjData, w: np.ndarray, T: int,
                            n: int) -> float:  # fmt: skip
    """Seconds for n worlds' chained-``mjd_transitionFD`` gradients on all cores (a thread
    per core, one MjData each: MuJoCo's C calls release the GIL, as ``mujoco.rollout``'s
    threads rely on)."""
    from concurrent.futures import ThreadPoolExecutor

    cores = os.cpu_count() or 1
    t0 = time.perf_counter()
    with ThreadPoolExecutor(cores) as pool:
        list(pool.map(lambda _: _c_transition_fd_gradient(m, d0, w, T), range(n)))
    return time.perf_counter() - t0


def bench_model(name: str, T: int, worlds: list[int]) -> dict:
    m = mj_model_from(gymnasium_model(name))
    d0 = _start(m, CONTACT_STEPS.get(name, 50))
    w = np.random.default_rng(1).normal(size=m.nv)
    step = mjx.load(m)
    ctrl = jnp.tile(jnp.asarray(d0.ctrl), (T, 1))
    qpos0 = jnp.asarray(d0.qpos)

    def loss(qvel0):
        sT = step.simulate({"qpos0": qpos0, "qvel0": qvel0}, T, ctrl=ctrl, checkpoint="sqrt")
        return jnp.dot(jnp.asarray(w), sT.qvel)

    v0 = jnp.asarray(d0.qvel)
    row: dict = {"model": name, "nv": m.nv, "T": T, "ncon": int(d0.ncon)}
    t0 = time.perf_counter()
    g_c = _c_gradient(m, d0, w, T)
    row["c_fd_s"] = time.perf_counter() - t0
    rk4 = int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4)
    if rk4:  # MuJoCo C refuses it: "mjd_transitionFD: RK4 integrator is not supported"
        row["c_transition_fd"] = "unsupported (RK4)"
    else:
        t0 = time.perf_counter()
        g_fd = _c_transition_fd_gradient(m, d0, w, T)
        row["c_transition_fd_s"] = time.perf_counter() - t0
        err = np.linalg.norm(g_fd - g_c) / np.linalg.norm(g_c)
        row["c_transition_fd_rel_error"] = float(err)
    fwd = jax.jit(loss)
    row["forward_compile_s"], row["forward_run_s"] = _timed(lambda: fwd(v0))
    grad = jax.jit(jax.grad(loss))
    row["grad_compile_s"], row["grad_run_s"] = _timed(lambda: grad(v0))
    g = np.asarray(grad(v0))
    row["grad_rel_error"] = float(np.linalg.norm(g - g_c) / np.linalg.norm(g_c))
    for n in worlds:
        if n == 1:
            continue
        batch = v0 + 1e-3 * jax.random.normal(jax.random.PRNGKey(n), (n, m.nv))
        vgrad = jax.jit(jax.vmap(jax.grad(loss)))
        compile_s, run_s = _timed(lambda f=vgrad, b=batch: f(b), repeats=1)
        row[f"grad_{n}_worlds_run_s"] = run_s
        row[f"grad_{n}_worlds_compile_s"] = compile_s
        if not rk4:
            row[f"c_transition_fd_{n}_worlds_s"] = _c_transition_fd_worlds(m, d0, w, T, n)
    if int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_EULER):
        m1 = step.model.replace(opt=step.model.opt.replace(iterations=1))
        data = step.data(step.initial_state(qpos0, v0))

        def bare(qvel0):
            def body(d, u):
                return mujoco_mjx.step(m1, d.replace(ctrl=u)), None

            dT, _ = jax.lax.scan(body, data.replace(qvel=qvel0), ctrl)
            return jnp.dot(jnp.asarray(w), dT.qvel)

        bgrad = jax.jit(jax.grad(bare))
        row["mjx_it1_compile_s"], row["mjx_it1_run_s"] = _timed(lambda: bgrad(v0))
        gb = np.asarray(bgrad(v0))
        row["mjx_it1_rel_error"] = float(np.linalg.norm(gb - g_c) / np.linalg.norm(g_c))
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--worlds", default="1,64,1024")
    args = parser.parse_args(argv)
    worlds = [int(x) for x in args.worlds.split(",")]
    rows = []
    for name in args.models.split(","):
        row = bench_model(name, args.steps, worlds)
        rows.append(row)
        print(
            "  ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
            ),
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
