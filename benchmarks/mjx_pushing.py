"""Costs and the pushing table for :mod:`diffsim.engines.mjx` (numbers for the README).

Run ``python -m benchmarks.mjx_pushing`` (float32, JAX's default; ``--only cost`` or
``--only pushing`` for one part). It prints:

* **cost**: the adapter's rollout and gradient against a bare ``jax.lax.scan`` over
  ``mjx.step`` on the pushing scene (T = 100, one rollout and a batch of 16), compile
  times, and the doctor's cost (time and evaluations) on each scene;
* **pushing**: Suh et al.'s pushing from 16 starts θ₀ ∈ [0, 1.2] m (the finger's final
  target; short of 0.35 m it never touches the box), 40 Adam steps with each estimator
  (diffsim's defaults, σ = 0.1, N = 32): the share of starts whose box ends within 2 cm of
  the target, and the evaluations used per start. The bare scan has no reverse-mode
  gradient (MJX's solver is a ``while_loop``): its gradient column uses
  ``opt.iterations = 1``, the only setting under which MJX alone differentiates in reverse.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import jax
import jax.numpy as jnp
import optax

from diffsim import diagnose, optimize, value_and_grad
from diffsim.engines import mjx, scenes
from diffsim.estimators import make_estimator

from ._harness import first_and_median

mujoco_mjx = mjx.mjx  # MuJoCo MJX as the adapter imported it (without its Warp probe's prints)

T = 100
BATCH = 16


def _bare(model: Any, data: Any):
    """``ctrl -> box x`` by a bare ``lax.scan`` over ``mjx.step``."""

    def run(theta):
        ctrl = scenes.pushing_controls(theta, T)

        def body(d, u):
            return mujoco_mjx.step(model, d.replace(ctrl=u)), None

        dT, _ = jax.lax.scan(body, data, ctrl)
        return (dT.qpos[1] + 0.5 - scenes.PUSHING_TARGET) ** 2

    return run


def cost() -> list[str]:
    step = mjx.load(scenes.path("pushing"))
    ours = scenes.pushing_loss(step)
    bare = _bare(step.model, mujoco_mjx.make_data(step.model))
    m1 = step.model.replace(opt=step.model.opt.replace(iterations=1))
    bare1 = _bare(m1, mujoco_mjx.make_data(m1))
    th = jnp.asarray(0.7)
    ths = jnp.linspace(0.3, 1.0, BATCH)
    rows = [
        f"pushing scene, T = {T} steps (h = 0.01 s), {jax.default_backend()}, "
        f"{jax.numpy.zeros(()).dtype}; seconds: first call (compile + run) / median run"
    ]
    cases = [
        ("rollout, 1", jax.jit(ours), jax.jit(bare), th),
        ("rollout, batch 16", jax.jit(jax.vmap(ours)), jax.jit(jax.vmap(bare)), ths),
        ("gradient, 1", jax.jit(jax.grad(ours)), jax.jit(jax.grad(bare1)), th),
        (
            "gradient, batch 16",
            jax.jit(jax.vmap(jax.grad(ours))),
            jax.jit(jax.vmap(jax.grad(bare1))),
            ths,
        ),
    ]
    for name, f_ours, f_bare, x in cases:
        c_o, r_o = first_and_median(lambda f=f_ours, x=x: f(x), repeats=5)
        c_b, r_b = first_and_median(lambda f=f_bare, x=x: f(x), repeats=5)
        rows.append(
            f"{name:<20} adapter {c_o:6.1f} / {r_o * 1e3:8.2f} ms   bare mjx.step scan "
            f"{c_b:6.1f} / {r_b * 1e3:8.2f} ms   ratio {r_o / r_b:5.2f}"
        )
    rows.append("doctor (diagnose with its defaults), seconds incl. compile, evaluations")
    key = jax.random.PRNGKey(0)
    wall = mjx.load(scenes.path("wall"))
    cart = mjx.load(scenes.path("cartpole"))
    free = mjx.load(scenes.path("free_flight"))

    def cart_loss(qvel0):
        return cart.simulate({"qvel0": qvel0}, T).qpos[1] ** 2

    def free_loss(qvel0):
        return jnp.sum(free.simulate({"qvel0": qvel0}, T).qpos[:3] ** 2)

    checks = [
        ("free_flight", free_loss, jnp.array([1.0, 0.0, 2.0, 0.0, 0.0, 0.0])),
        ("cartpole", cart_loss, jnp.array([0.3, 0.5])),
        ("wall (v0 = 9)", scenes.wall_loss(wall), jnp.asarray(9.0)),
        ("pushing (θ = 0.3)", ours, jnp.asarray(0.3)),
    ]
    for name, loss, theta in checks:
        t0 = time.perf_counter()
        d = diagnose(loss, theta, key)
        seconds = time.perf_counter() - t0
        ev = d.evaluations
        rows.append(
            f"{name:<20} {d.verdict:<12} {seconds:6.1f} s   {ev['loss']} loss + {ev['grad']} "
            f"gradient evaluations   flags: {', '.join(d.flag_names) or 'none'}"
        )
    return rows


def pushing(steps: int = 40) -> list[str]:
    step = mjx.load(scenes.path("pushing"))
    loss = scenes.pushing_loss(step)
    starts = jnp.linspace(0.0, 1.2, 16)
    optimizer = optax.adam(optax.cosine_decay_schedule(0.05, steps, alpha=0.1))
    rows = [
        f"pushing: 16 starts θ0 in [0, 1.2] m, {steps} Adam steps (0.05, cosine decay), "
        f"success = box within {scenes.PUSHING_TOLERANCE * 100:.0f} cm of the target",
        f"{'estimator':<10} {'success':>8} {'evaluations/start':>18} {'mean |miss| cm':>15}",
    ]
    key = jax.random.PRNGKey(0)
    for name in ("exact", "first", "zeroth", "alpha", "auto"):
        est = make_estimator(name)

        def run(theta0, est=est):
            r = optimize(loss, theta0, est, steps=steps, key=key, optimizer=optimizer)
            return r.loss, r.evaluations

        final, evals = jax.jit(jax.vmap(run))(starts)
        miss = jnp.sqrt(final)
        ok = miss < scenes.PUSHING_TOLERANCE
        rows.append(
            f"{name:<10} {int(ok.sum()):>5}/16 {float(jnp.mean(evals)):>18.0f} "
            f"{float(jnp.mean(miss)) * 100:>15.2f}"
        )
    # the exact gradient in value_and_grad's auto mode: which mode it picks for one start
    g = value_and_grad(loss, jnp.asarray(0.7))
    rows.append(f"(value_and_grad at θ = 0.7: {g.mode} mode — {g.reason})")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Costs and the pushing table of engines.mjx")
    parser.add_argument("--only", choices=("cost", "pushing"), default=None)
    args = parser.parse_args(argv)
    if args.only in (None, "cost"):
        print("\n".join(cost()), flush=True)
    if args.only in (None, "pushing"):
        print("\n".join(pushing()), flush=True)


if __name__ == "__main__":
    main()
