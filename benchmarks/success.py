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

import diffsim
from diffsim.estimators import Estimator, make_estimator
from diffsim.systems import SYSTEMS, Study, bouncing_ball, wall_study
from diffsim.systems import pushing as push

ESTIMATOR_NAMES = ("exact", "zeroth", "first", "alpha", "auto")


OWN_SIGMA = ("auto",)
"""Estimators run with their own σ (the one that needs no expertise); the others get the
task's hand-picked σ."""


@dataclasses.dataclass(frozen=True)
class Task:
    """A contact task: a :class:`~diffsim.systems.Study` (the loss of θ, the outcome that
    must land within ``tolerance`` of ``target``, and the descent every estimator runs),
    its starting points and the settings shared by every estimator."""

    name: str
    title: str
    study: Study
    starts: Callable[[int], Any]  # number of starts -> stacked θ0
    sigma: float  # the hand-picked σ of the fixed estimators
    samples: int
    steps: int
    lr: float


def _descent(loss: Callable[[Any], Any], sigma_end: float) -> Callable[..., Any]:
    """The wall study's recipe for any loss: Adam with the learning rate cosine-decayed
    (:func:`~diffsim.systems.wall_study.wall_optimizer`), σ cosine-annealed from the
    estimator's own (its largest component when relative to θ) to ``sigma_end`` over 60 %
    of the steps."""

    def run(theta0, estimator, *, key, steps, lr, callback=None):
        sigma = estimator.smoothing_scale()
        kw = {}
        if sigma is not None:
            start = jnp.max(diffsim.estimators.sigma_vector(sigma, theta0))
            kw["sigma_schedule"] = diffsim.optimization.cosine_anneal(
                start, sigma_end, steps, wall_study.RECIPE.anneal_fraction
            )
        return diffsim.optimize(loss, theta0, estimator, steps=steps, key=key,
                                optimizer=wall_study.wall_optimizer(lr, steps), callback=callback,
                                **kw)  # fmt: skip

    return run


def _study(loss, outcome, target: float, tolerance: float, sigma_end: float) -> Study:
    return Study(loss, _descent(loss, sigma_end), outcome, target, tolerance)


def _reach(outcome, target: float, tolerance: float, sigma_end: float) -> Study:
    """Bring ``outcome(θ)`` to ``target``: the loss (outcome(θ) − target)²."""
    return _study(lambda t: (outcome(t) - target) ** 2, outcome, target, tolerance, sigma_end)


def _wall() -> Task:
    study = SYSTEMS["wall"].study
    assert study is not None  # the registry's wall study: optimize_wall, the same recipe
    return Task(
        "wall",
        "wall (v0 ∈ [4.5, 13.5])",
        study,
        lambda n: jnp.linspace(4.5, 13.5, n),
        wall_study.RECIPE.sigma,
        wall_study.RECIPE.samples,
        wall_study.RECIPE.steps,
        wall_study.RECIPE.lr,
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
        _study(loss, box_x, PUSH_GOAL, 0.01, sigma_end=0.01),
        lambda n: jnp.linspace(0.0, 1.0, n)[:, None] * jnp.ones((1, push.NUM_STEPS)),
        0.1,
        16,
        300,
        0.1,
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
        _reach(_bounce_height, BOUNCE_GOAL, 0.01, sigma_end=0.01),
        lambda n: jnp.linspace(-4.0, 4.0, n),
        0.3,
        16,
        200,
        0.1,
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
        _reach(_stiff_height, STIFF_GOAL, 0.01, sigma_end=0.005),
        lambda n: jnp.linspace(0.3, 2.0, n),
        0.1,
        16,
        200,
        0.05,
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
    opts = {"num_samples": task.samples}
    if name not in OWN_SIGMA:
        opts["sigma"] = task.sigma
    return make_estimator(name, **{k: v for k, v in opts.items() if cls.takes(k)})


def run_task(task: Task, name: str, starts: int) -> dict[str, Any]:
    """Optimize from every start with one estimator; the success rate and evaluations."""
    est = _estimator(task, name)
    study = task.study
    outcome_path = jax.jit(jax.vmap(study.outcome))

    def one(theta0, key):
        r = study.optimize(theta0, est, key=key, steps=task.steps, lr=task.lr)
        path = outcome_path(r.history.theta)
        return float(study.outcome(r.theta)), np.asarray(path), np.asarray(r.history.evaluations)

    theta0 = task.starts(starts)
    keys = jax.random.split(jax.random.PRNGKey(0), starts)
    t0 = time.perf_counter()
    # one compiled optimisation reused for every start (the starts differ in values only)
    runs = [one(theta0[i], keys[i]) for i in range(starts)]
    seconds = time.perf_counter() - t0
    final = np.array([r[0] for r in runs])
    outcomes = np.stack([r[1] for r in runs])
    evals = np.stack([r[2] for r in runs])
    ok = np.abs(final - study.target) <= study.tolerance
    within = np.abs(outcomes - study.target) <= study.tolerance  # (starts, steps)
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
