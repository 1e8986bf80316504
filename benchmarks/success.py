"""Which estimator reaches the goal: success rates over many starts, for every contact task.

    python -m benchmarks.success [--starts 24] [--json] [--tasks wall,push10,...]

Every contact task diffsim ships, × every estimator that descends (exact, ZoBG, FoBG, AoBG
and ``auto``): ``diffsim.optimize`` (Adam, the same schedule for every estimator) from
``--starts`` starting points, each with its own seed (one compiled optimisation per task
and estimator, reused for every start). A run succeeds when its outcome is within the
task's tolerance of the goal at the end; "evaluations to success" counts the simulator
evaluations (loss + gradient) spent up to the first iterate within tolerance, for the runs
that succeed.

The fixed estimators get the hand-picked σ stated per task (the σ a user who read Suh et
al. would choose), cosine-annealed to a small σ over 60 % of the steps; ``auto`` gets its
defaults (σ relative to θ, annealed by the same schedule from its value at the start) and
the same N; a step where it trusts the exact gradient costs it N + 2 evaluations (ZoBG's
N + 1 and one gradient), one where it does not 2N + 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import diffsim
from diffsim.estimators import Estimator, make_estimator
from diffsim.systems import SYSTEMS, bouncing_ball, wall_study
from diffsim.systems import projectile_wall as pw
from diffsim.systems import pushing as push

ESTIMATOR_NAMES = ("exact", "zeroth", "first", "alpha", "auto")


@dataclasses.dataclass(frozen=True)
class Task:
    """A contact task: a loss of θ, starting points, the outcome that must land within
    ``tolerance`` of ``goal``, and the optimizer settings shared by every estimator."""

    name: str
    title: str
    loss: Callable[[Any], Any]
    starts: Callable[[int], Any]  # number of starts -> stacked θ0
    outcome: Callable[[Any], Any]  # θ -> scalar outcome
    goal: float
    tolerance: float
    sigma: float  # the hand-picked σ of the fixed estimators
    samples: int
    steps: int
    lr: float
    anneal_to: float | None = None  # σ cosine-annealed to this over 60 % of the steps


def _wall() -> Task:
    return Task(
        "wall",
        "wall (v0 ∈ [4.5, 13.5])",
        pw.loss,
        lambda n: jnp.linspace(4.5, 13.5, n),
        pw.landing_x,
        pw.TARGET,
        wall_study.TOLERANCE_X,
        wall_study.SIGMA,
        wall_study.SAMPLES,
        wall_study.STEPS,
        wall_study.LR,
        anneal_to=wall_study.SIGMA_END,
    )


PUSH_GOAL = 0.3  # reachable at every k within the effort penalty (k = 10: u ≈ 2.2 m/s)


def _push(k: float) -> Task:
    def loss(u):
        return push.push_loss(u, k, target=PUSH_GOAL)

    def box_x(u):
        x_T, _ = diffsim.rollout(
            push.push_step(), push.initial_state(u.dtype), {"k": jnp.asarray(k, u.dtype)},
            u.shape[0], inputs=u, trajectory=False,
        )  # fmt: skip
        return x_T[1]

    return Task(
        f"push{int(k)}",
        f"pushing, k = {int(k)}, box to 0.3 m (u ∈ [0, 1] m/s)",
        loss,
        lambda n: jnp.linspace(0.0, 1.0, n)[:, None] * jnp.ones((1, push.NUM_STEPS)),
        box_x,
        PUSH_GOAL,
        0.01,
        0.1,
        16,
        300,
        0.1,
        anneal_to=0.01,
    )


BOUNCE_T = 360  # 1.5 s at h = 1/240: one bounce or two, depending on vy0
BOUNCE_GOAL = 0.6


def _bounce_height(vy0):
    sys = bouncing_ball(h=1 / 240)
    s0 = (jnp.asarray(1.0, vy0.dtype), vy0)
    theta = jax.tree_util.tree_map(lambda a: jnp.asarray(a, vy0.dtype), sys.theta)
    return diffsim.rollout(sys.step, s0, theta, BOUNCE_T, trajectory=False)[0]


def _bounce() -> Task:
    return Task(
        "bounce",
        "bouncing ball aimed at y = 0.6 m at 1.5 s (vy0 ∈ [−4, 4])",
        lambda v: (_bounce_height(v) - BOUNCE_GOAL) ** 2,
        lambda n: jnp.linspace(-4.0, 4.0, n),
        _bounce_height,
        BOUNCE_GOAL,
        0.01,
        0.3,
        16,
        200,
        0.1,
        anneal_to=0.01,
    )


STIFF_GOAL = 0.5


def _stiff_height(y0):
    spec = SYSTEMS["stiff"].build(k=1e5)
    sys = spec.system
    s0 = (y0, jnp.asarray(sys.s0[1], y0.dtype))
    theta = jax.tree_util.tree_map(lambda a: jnp.asarray(a, y0.dtype), sys.theta)
    return diffsim.rollout(sys.step, s0, theta, spec.num_steps, trajectory=False)[0]


def _stiff() -> Task:
    return Task(
        "stiff",
        "stiff contact (k = 1e5), drop height for y = 0.5 m at 1 s (y0 ∈ [0.3, 2])",
        lambda y0: (_stiff_height(y0) - STIFF_GOAL) ** 2,
        lambda n: jnp.linspace(0.3, 2.0, n),
        _stiff_height,
        STIFF_GOAL,
        0.01,
        0.1,
        16,
        200,
        0.05,
        anneal_to=0.005,
    )


TASKS: dict[str, Callable[[], Task]] = {
    "wall": _wall,
    "push10": lambda: _push(10.0),
    "push100": lambda: _push(100.0),
    "push1000": lambda: _push(1000.0),
    "bounce": _bounce,
    "stiff": _stiff,
}


def _estimator(task: Task, name: str) -> Estimator:
    cls = diffsim.estimators.ESTIMATORS[name]
    if name == "auto":
        return make_estimator(name, num_samples=task.samples)
    opts = {"sigma": task.sigma, "num_samples": task.samples}
    return make_estimator(name, **{k: v for k, v in opts.items() if cls.takes(k)})


def run_task(task: Task, name: str, starts: int) -> dict[str, Any]:
    """Optimize from every start with one estimator; the success rate and evaluations."""
    est = _estimator(task, name)
    optimizer = optax.adam(optax.cosine_decay_schedule(task.lr, task.steps, 0.05))
    anneal = task.anneal_to is not None and est.smoothing_scale() is not None

    def schedule_for(theta0):
        if not anneal:
            return None
        # the task's schedule, from the hand-picked σ or (auto) from auto's own σ at θ0
        start = task.sigma if name != "auto" else jnp.max(diffsim.sigma_vector(est.sigma, theta0))
        return diffsim.cosine_anneal(start, task.anneal_to, task.steps, wall_study.ANNEAL_FRACTION)

    outcome_path = jax.jit(jax.vmap(task.outcome))

    def one(theta0, key):
        schedule = schedule_for(theta0)
        kw = {} if schedule is None else {"sigma_schedule": schedule}
        r = diffsim.optimize(task.loss, theta0, est, steps=task.steps, key=key,
                             optimizer=optimizer, **kw)  # fmt: skip
        path = outcome_path(r.history.theta)
        return float(task.outcome(r.theta)), np.asarray(path), np.asarray(r.history.evaluations)

    theta0 = task.starts(starts)
    keys = jax.random.split(jax.random.PRNGKey(0), starts)
    t0 = time.perf_counter()
    # one compiled optimisation reused for every start (the starts differ in values only)
    runs = [one(theta0[i], keys[i]) for i in range(starts)]
    seconds = time.perf_counter() - t0
    final = np.array([r[0] for r in runs])
    outcomes = np.stack([r[1] for r in runs])
    evals = np.stack([r[2] for r in runs])
    ok = np.abs(final - task.goal) <= task.tolerance
    within = np.abs(outcomes - task.goal) <= task.tolerance  # (starts, steps)
    first = np.argmax(within, axis=1)
    to_success = [int(evals[i, first[i]]) for i in range(starts) if ok[i] and within[i].any()]
    return {
        "task": task.name,
        "estimator": name,
        "successes": int(ok.sum()),
        "starts": starts,
        "rate": float(ok.mean()),
        "median_evaluations_to_success": float(np.median(to_success)) if to_success else None,
        "evaluations_per_run": int(evals[0, -1]),
        "seconds": seconds,
    }


def table(rows: list[dict[str, Any]], tasks: list[Task]) -> str:
    """The Markdown table: one row per task, one column per estimator, "rate (evals)"."""
    head = "| task | " + " | ".join(ESTIMATOR_NAMES) + " |"
    lines = [head, "|" + "---|" * (len(ESTIMATOR_NAMES) + 1)]
    for t in tasks:
        cells = []
        by = {r["estimator"]: r for r in rows if r["task"] == t.name}
        best = max(r["successes"] for r in by.values())
        for e in ESTIMATOR_NAMES:
            r = by[e]
            ev = r["median_evaluations_to_success"]
            cell = f"{r['successes']}/{r['starts']}" + (f" ({ev:,.0f})" if ev is not None else "")
            cells.append(f"**{cell}**" if r["successes"] == best else cell)
        lines.append(f"| {t.title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(rows: list[dict[str, Any]], tasks: list[Task]) -> list[str]:
    """Where auto meets the goals (≥ 95 %, within one start of the best fixed estimator, no
    more evaluations to success than ZoBG) and where it misses them."""
    out = []
    for t in tasks:
        by = {r["estimator"]: r for r in rows if r["task"] == t.name}
        a, z = by["auto"], by["zeroth"]
        best = max(by[e]["successes"] for e in ESTIMATOR_NAMES if e != "auto")
        misses = []
        if a["rate"] < 0.95:
            misses.append(f"success {a['rate']:.0%} < 95 %")
        if a["successes"] < best - 1:
            misses.append(f"{a['successes']} vs the best fixed estimator's {best}")
        ea, ez = a["median_evaluations_to_success"], z["median_evaluations_to_success"]
        if ea is not None and ez is not None and ea > ez:
            misses.append(f"{ea:,.0f} evaluations to success vs ZoBG's {ez:,.0f}")
        out.append(f"{t.name}: " + ("meets every goal" if not misses else "; ".join(misses)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.success", description=__doc__.split("\n")[0]
    )
    p.add_argument("--starts", type=int, default=24, help="starts (and seeds) per task (>= 1)")
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated: {','.join(TASKS)}")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.tasks.split(",") if n.strip()]
    unknown = sorted(set(names) - set(TASKS))
    if unknown:
        p.error(f"--tasks: unknown {unknown}; choose from {', '.join(TASKS)}")
    if args.starts < 1:
        p.error(f"--starts must be >= 1, got {args.starts}")
    jax.config.update("jax_enable_x64", True)
    tasks = [TASKS[n]() for n in names]
    rows = []
    for t in tasks:
        for e in ESTIMATOR_NAMES:
            rows.append(run_task(t, e, args.starts))
            print(f"  {t.name:<9} {e:<7} {rows[-1]['successes']}/{args.starts}"
                  f"  {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    if args.json:
        print(
            json.dumps(
                {
                    "command": "python -m benchmarks.success " + " ".join(argv or sys.argv[1:]),
                    "rows": rows,
                }
            )
        )
        return 0
    print(table(rows, tasks))
    print()
    for line in verdicts(rows, tasks):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
