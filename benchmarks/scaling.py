"""``python -m benchmarks.scaling``: the public API against the hand-written step, over N and T.

    python -m benchmarks.scaling [--sizes 1,256,4096,65536,262144] [--steps 100,1000,10000]
                                 [--rounds 7] [--figure PATH] [--json]

For each (N, T) it times, in alternation (random order per round, an untimed call before
each timed one), forward + gradient of the bouncing-balls task (:mod:`benchmarks.task`):

* ``api-vmap``: ``jax.value_and_grad`` of ``jax.vmap`` over ``diffsim.rollout`` of
  ``WithContact(SemiImplicitEuler, Restitution)`` — the composed public step;
* ``api-batched``: ``diffsim.rollout`` of ``jax.vmap`` of the same step (a batched state);
* ``api-forward``: ``diffsim.value_and_grad(..., batched=True)`` (forward mode, chosen from
  the shapes);
* ``hand``: ``jax.value_and_grad`` of the same physics written by hand over one array per
  coordinate (plain JAX, the benchmark's ``jax`` row).

It prints the per-ball-step cost (ns) of each, and each API row ÷ ``hand`` as the median of
the per-round ratios with its 95 % interval (order statistics). The cost per ball-step must
not grow with N·T faster than linearly; the ratios are the "API ÷ hand-written" of issue 15.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from . import _harness as H


def _impls(n: int, steps: int) -> dict:
    import jax
    import jax.numpy as jnp

    import diffsim

    from ._jax_impls import (
        THETA,
        DiffsimForwardImpl,
        DiffsimImpl,
        PlainJaxImpl,
        _JaxLoss,
        ball_step,
    )
    from .task import X_TARGET, Y_TARGET

    class Batched(_JaxLoss):
        def __init__(self) -> None:
            step = jax.vmap(ball_step(), in_axes=(0, None))
            theta = {k: jnp.asarray(v) for k, v in THETA.items()}

            def loss(vy0, x0, y0, vx0):
                s0 = (jnp.stack([x0, y0], -1), jnp.stack([vx0, vy0], -1))
                p, _ = diffsim.rollout(step, s0, theta, steps, trajectory=False)
                return jnp.sum((p[:, 0] - X_TARGET) ** 2 + (p[:, 1] - Y_TARGET) ** 2)

            super().__init__(n, loss)

    return {
        "api-vmap": DiffsimImpl(n, steps),
        "api-batched": Batched(),
        "api-forward": DiffsimForwardImpl(n, steps, **H.DIFFSIM_FORWARD_OPTIONS),
        "hand": PlainJaxImpl(n, steps),
    }


def run_cell(n: int, steps: int, rounds: int) -> dict:
    impls = _impls(n, steps)
    for impl in impls.values():  # compile
        impl.gradient()
    times: dict[str, list[float]] = {k: [] for k in impls}
    for _ in range(rounds):
        order = list(impls)
        random.shuffle(order)
        for name in order:
            impls[name].gradient()  # untimed: steady state
            t0 = time.perf_counter()
            impls[name].gradient()
            times[name].append(time.perf_counter() - t0)
    cell: dict = {"n": n, "steps": steps, "rows": {}}
    for name, ts in times.items():
        ratios = [t / h for t, h in zip(ts, times["hand"])]
        cell["rows"][name] = {
            "time": H.summarize(ts),
            "ns_per_ball_step": 1e9 * H.summarize(ts)["median"] / (n * steps),
            "ratio_to_hand": H.summarize(ratios),
        }
    return cell


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__)
    p.add_argument("--sizes", default="1,256,4096,65536,262144")
    p.add_argument("--steps", default="100,1000,10000")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--max-ball-steps", type=float, default=3e9, help="skip larger cells")
    p.add_argument("--figure", default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    H.set_xla_flags()
    sizes = [int(s) for s in args.sizes.split(",")]
    steps = [int(s) for s in args.steps.split(",")]
    cells = []
    for t in steps:
        for n in sizes:
            if n * t > args.max_ball_steps:
                continue
            cell = run_cell(n, t, args.rounds)
            cells.append(cell)
            if not args.json:
                row = "  ".join(
                    f"{k} {v['ns_per_ball_step']:.3g} ns (÷hand {v['ratio_to_hand']['median']:.2f}"
                    f" [{v['ratio_to_hand']['ci'][0]:.2f}–{v['ratio_to_hand']['ci'][1]:.2f}])"
                    for k, v in cell["rows"].items()
                    if k != "hand"
                )
                hand = cell["rows"]["hand"]["ns_per_ball_step"]
                print(f"N={n:>7} T={t:>6}  hand {hand:.3g} ns  {row}", flush=True)
    out = {
        "command": "python -m benchmarks.scaling " + " ".join(argv or sys.argv[1:]),
        "cells": cells,
    }
    if args.figure:
        _figure(cells, args.figure)
    if args.json:
        print(json.dumps(out, indent=1))
    return out


def _figure(cells: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for t in sorted({c["steps"] for c in cells}):
        sub = [c for c in cells if c["steps"] == t]
        for name, style in (("api-vmap", "-o"), ("api-forward", "--s"), ("hand", ":^")):
            ax.plot(
                [c["n"] for c in sub],
                [c["rows"][name]["ns_per_ball_step"] for c in sub],
                style,
                label=f"{name}, T={t}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("balls N")
    ax.set_ylabel("forward + gradient, ns per ball-step")
    ax.set_title("diffsim's public API against the hand-written step (same run)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
