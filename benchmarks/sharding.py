"""``python -m benchmarks.sharding``: strong and weak scaling over forced host CPU devices.

    python -m benchmarks.sharding [--devices 1,2,4,8] [--total 16384] [--per-device 4096]
                                  [--steps 1000] [--rounds 15] [--json]

For each device count D it starts a fresh Python process with
``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (a JAX process's device count is
fixed when its backend starts) plus the benchmark harness's flags
(:data:`benchmarks._harness.XLA_FLAGS`: XLA's intra-op threading off, so one device runs
on one thread and D devices on up to D threads). In it, it times three workloads through
the public API, each in two configurations:

* ``zeroth``: ``diffsim.estimators.ZerothOrder(sigma=0.5, num_samples=N, devices=D)`` on one
  ball of the benchmark task (:mod:`benchmarks.task`), the loss of its initial ``vy`` after
  T steps of the composed public step (``benchmarks._jax_impls.ball_loss``);
* ``first``: ``diffsim.estimators.FirstOrder`` with the same arguments (N reverse-mode
  gradients of the rollout);
* ``rollout``: ``jax.jit(jax.vmap(jax.value_and_grad(one_ball)))`` over N balls placed by
  ``diffsim.sharding.shard_batch(batch, devices=D)`` (computation follows data);

with **strong** scaling (N = ``--total`` whatever D) and **weak** scaling
(N = ``--per-device`` × D). Each round runs every (workload, scaling) pair once, in a fresh
random order, each timed call after an untimed one; the median over the rounds and its
95 % interval (order statistics) are reported, with the speed-up and the parallel
efficiency against D = 1: strong T₁ / T_D and T₁ / (D T_D); weak D T₁ / T_D (throughput)
and T₁ / T_D. The speed-up interval is the conservative one from the two time intervals
(the processes run one after the other, so there are no per-round ratios).

Memory: for every configuration, the per-device sizes XLA plans for the compiled program
(``jax.jit(f).lower(...).compile().memory_analysis()``: ``temp_size_in_bytes`` +
``argument_size_in_bytes`` + ``output_size_in_bytes``; for a sharded program these are the
sizes of one device's program) and the process's peak RSS (VmHWM, all D devices of the
process together, JAX runtime included). It also reports the process's CPU time ÷ wall
time over the timed rounds: how many cores the D devices kept busy (≤ 1 for D = 1).

What a small machine can show: forced host devices share the machine's cores, so the
speed-up is bounded by the number of idle cores (2 on the machine the docs' tables come
from), whatever D is; past that, more devices only add the cost of splitting and gathering.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

from . import _harness as H
from ._report import fmt_sig, fmt_time

WORKLOADS = ("zeroth", "first", "rollout")
SCALINGS = ("strong", "weak")
SIGMA = 0.5
BALL = (0.5, 1.0, 0.3)
"""The estimators' ball: ``x0, y0, vx0``; θ is its initial ``vy`` (0.7 m/s)."""
THETA0 = 0.7


def _peak_rss_mib() -> float | None:
    try:
        return H._status_kib("VmHWM") / 1024
    except OSError:
        return None


def _memory(compiled) -> dict:
    m = compiled.memory_analysis()
    if m is None:
        return {}
    fields = ("temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes")
    out = {f: int(getattr(m, f, 0) or 0) for f in fields}
    out["alias_size_in_bytes"] = int(getattr(m, "alias_size_in_bytes", 0) or 0)
    out["total_bytes"] = sum(out[f] for f in fields)
    return out


def _build(workload: str, n: int, devices: int, steps: int):
    """(call, compiled program) for one configuration in this process."""
    import jax
    import jax.numpy as jnp

    import diffsim

    from ._jax_impls import ball_loss, ball_step
    from .task import initial_state

    one = ball_loss(ball_step(), steps)
    if workload in ("zeroth", "first"):
        cls = (
            diffsim.estimators.ZerothOrder
            if workload == "zeroth"
            else diffsim.estimators.FirstOrder
        )
        est = cls(sigma=SIGMA, num_samples=n, devices=devices)
        x0, y0, vx0 = (jnp.float32(v) for v in BALL)

        def loss(vy0):
            return one(vy0, x0, y0, vx0)

        theta, key = jnp.float32(THETA0), jax.random.PRNGKey(0)
        compiled = jax.jit(lambda t, k: est(loss, t, k)).lower(theta, key).compile()

        def call():
            return jax.block_until_ready(est(loss, theta, key))

        return call, compiled
    x0, y0, vx0, vy0 = initial_state(n)
    args = diffsim.sharding.shard_batch(
        tuple(jnp.asarray(a) for a in (vy0, x0, y0, vx0)), devices=devices
    )
    run = jax.jit(jax.vmap(jax.value_and_grad(one)))
    compiled = run.lower(*args).compile()

    def call():
        return jax.block_until_ready(run(*args))

    return call, compiled


def child(devices: int, total: int, per_device: int, steps: int, rounds: int, workloads) -> dict:
    """In a process with ``devices`` forced host devices: time and measure every config."""
    import jax

    assert jax.device_count() >= devices, (jax.device_count(), devices)
    sizes = {"strong": total, "weak": per_device * devices}
    calls, out = {}, {}
    for w in workloads:
        for s in SCALINGS:
            n = sizes[s]
            t0 = time.perf_counter()
            call, compiled = _build(w, n, devices, steps)
            call()
            first = time.perf_counter() - t0
            calls[(w, s)] = call
            out[f"{w}/{s}"] = {
                "workload": w,
                "scaling": s,
                "n": n,
                "per_device": -(-n // devices),
                "first_call_s": first,
                "memory_per_device": _memory(compiled),
            }
    times: dict = {k: [] for k in calls}
    rng = random.Random(devices)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        order = list(calls)
        rng.shuffle(order)
        for k in order:
            calls[k]()  # untimed: steady state
            t0 = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - t0)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    for (w, s), ts in times.items():
        out[f"{w}/{s}"]["time_s"] = H.summarize(ts)
    return {
        "cpu_per_wall": cpu / wall,
        "devices": devices,
        "jax_devices": jax.device_count(),
        "peak_rss_mib": _peak_rss_mib(),
        "load_after": os.getloadavg()[0],
        "configs": out,
    }


def _run_child(devices: int, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", H.XLA_FLAGS).split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [here, os.path.join(here, "src"), env.get("PYTHONPATH", "")]
    )
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.sharding",
        "--child",
        str(devices),
        "--total",
        str(args.total),
        "--per-device",
        str(args.per_device),
        "--steps",
        str(args.steps),
        "--rounds",
        str(args.rounds),
        "--workloads",
        args.workloads,
    ]
    load = os.getloadavg()[0]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return {"devices": devices, "error": p.stderr.strip()[-2000:]}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["load_before"] = load
    res["xla_flags"] = env["XLA_FLAGS"]
    return res


def _ratio_ci(t1: dict, td: dict) -> tuple[float, float]:
    """Conservative interval of T₁ / T_D from the two medians' intervals."""
    return t1["ci"][0] / td["ci"][1], t1["ci"][1] / td["ci"][0]


def add_scaling(children: list[dict]) -> None:
    """Speed-up and efficiency of every config against the D = 1 child (in place)."""
    base = next((c for c in children if c.get("devices") == 1 and "configs" in c), None)
    if base is None:
        return
    for c in children:
        for key, row in c.get("configs", {}).items():
            t1, td, d = base["configs"][key]["time_s"], row["time_s"], c["devices"]
            lo, hi = _ratio_ci(t1, td)
            r = t1["median"] / td["median"]
            if row["scaling"] == "strong":
                row["speedup"], row["speedup_ci"] = r, [lo, hi]
                row["efficiency"] = r / d
            else:  # throughput ratio (work grows with D)
                row["speedup"], row["speedup_ci"] = d * r, [d * lo, d * hi]
                row["efficiency"] = r
            mem1 = base["configs"][key]["memory_per_device"].get("total_bytes")
            mem = row["memory_per_device"].get("total_bytes")
            row["memory_ratio_to_one_device"] = mem / mem1 if mem and mem1 else None


def fmt_bytes(b: float | None) -> str:
    """Bytes with a binary unit, 2 significant digits: ``fmt_bytes(3 * 2**20) == '3.0 MiB'``."""
    if b is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{fmt_sig(b / scale)} {unit}"
    return f"{int(b)} B"


def table(children: list[dict], workloads) -> str:
    lines = []
    for s in SCALINGS:
        lines.append(
            f"\n{s} scaling ({'fixed total N' if s == 'strong' else 'fixed N per device'})"
        )
        lines.append(
            f"{'workload':<8} {'D':>2} {'N':>6} {'time per call':>18} {'speed-up':>16} "
            f"{'efficiency':>10} {'mem/device':>10}  {'= temp + arguments + outputs':<30} "
            f"{'RSS':>8}"
        )
        for w in workloads:
            for c in children:
                if "configs" not in c:
                    lines.append(f"{w:<8} {c['devices']:>2} failed: {c['error'][-200:]}")
                    continue
                r = c["configs"][f"{w}/{s}"]
                m = r["memory_per_device"]
                sp = r.get("speedup")
                spx = (
                    f"{fmt_sig(sp)} [{fmt_sig(r['speedup_ci'][0])}–{fmt_sig(r['speedup_ci'][1])}]"
                    if sp
                    else "—"
                )
                parts = " + ".join(
                    fmt_bytes(m.get(f"{k}_size_in_bytes")) for k in ("temp", "argument", "output")
                )
                rss = c.get("peak_rss_mib")
                lines.append(
                    f"{w:<8} {c['devices']:>2} {r['n']:>6} {fmt_time(r['time_s']):>18} {spx:>16} "
                    f"{fmt_sig(r.get('efficiency')):>10} {fmt_bytes(m.get('total_bytes')):>10}  "
                    f"{parts:<30} {fmt_bytes(rss * 2**20) if rss else '—':>8}"
                )
    return "\n".join(lines)


def markdown(children: list[dict], workloads) -> str:
    """The tables of :func:`table` as Markdown (for the docs); ``--markdown``."""
    lines = []
    for s in SCALINGS:
        what = "fixed total N" if s == "strong" else "fixed N per device"
        lines += [
            f"\n**{s.capitalize()} scaling** ({what})\n",
            "| workload | D | N | time per call | speed-up | efficiency "
            "| memory per device (temp + arguments + outputs) |",
            "|---|--:|--:|--:|--:|--:|--:|",
        ]
        for w in workloads:
            for c in children:
                if "configs" not in c:
                    continue
                r = c["configs"][f"{w}/{s}"]
                m = r["memory_per_device"]
                ci = r.get("speedup_ci") or [None, None]
                parts = " + ".join(
                    fmt_bytes(m.get(f"{k}_size_in_bytes")) for k in ("temp", "argument", "output")
                )
                lines.append(
                    f"| {w} | {c['devices']} | {r['n']} | {fmt_time(r['time_s'])} "
                    f"| {fmt_sig(r.get('speedup'))} [{fmt_sig(ci[0])}–{fmt_sig(ci[1])}] "
                    f"| {fmt_sig(r.get('efficiency'))} | {fmt_bytes(m.get('total_bytes'))} "
                    f"({parts}) |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sharding", description=__doc__)
    p.add_argument("--devices", default="1,2,4,8", help="comma-separated device counts")
    p.add_argument("--total", type=int, default=16384, help="strong scaling: N samples/balls")
    p.add_argument("--per-device", type=int, default=4096, help="weak scaling: N per device")
    p.add_argument("--steps", type=int, default=1000, help="T steps of each rollout")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    workloads = tuple(w for w in args.workloads.split(",") if w)
    if set(workloads) - set(WORKLOADS):
        p.error(f"--workloads: choose from {','.join(WORKLOADS)}")
    if min(args.total, args.per_device, args.steps, args.rounds) < 1:
        p.error("--total, --per-device, --steps and --rounds must be >= 1")
    if args.child:
        res = child(args.child, args.total, args.per_device, args.steps, args.rounds, workloads)
        print(json.dumps(res))
        return res
    try:
        counts = [int(d) for d in args.devices.split(",")]
    except ValueError:
        p.error(f"--devices must be comma-separated integers, got {args.devices!r}")
    if min(counts) < 1:
        p.error("--devices must be >= 1")
    if 1 not in counts:
        counts = [1, *counts]  # the baseline
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    versions = H.versions()
    log(
        f"machine: {versions['machine']}, {versions['cores']} cores; forced host devices "
        f"share these cores, so the speed-up is at most ~{versions['cores']} whatever D is"
    )
    children = []
    for d in counts:
        log(f"D = {d}: running ({args.rounds} rounds) ...")
        children.append(_run_child(d, args))
        c = children[-1]
        if "error" in c:
            log(f"  failed: {c['error'][-500:]}")
        else:
            log(
                f"  load average {c['load_before']:.1f} before, {c['load_after']:.1f} after; "
                f"CPU time / wall time while timing {c.get('cpu_per_wall', float('nan')):.2f}"
            )
    add_scaling(children)
    out = {
        "command": "python -m benchmarks.sharding "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "versions": versions,
        "settings": {
            "devices": counts,
            "total": args.total,
            "per_device": args.per_device,
            "steps": args.steps,
            "rounds": args.rounds,
            "sigma": SIGMA,
            "ci_level": H.CI_LEVEL,
        },
        "memory_fields": "temp_size_in_bytes + argument_size_in_bytes + output_size_in_bytes "
        "of compiled.memory_analysis() (one device's program)",
        "children": children,
    }
    if args.json:
        print(json.dumps(out, indent=1))
    elif args.markdown:
        print(markdown(children, workloads))
    else:
        print(table(children, workloads))
        print(
            "\nspeed-up: strong T1/TD, weak D*T1/TD (throughput); efficiency: strong "
            "T1/(D*TD), weak T1/TD. [interval]: from the two medians' 95% intervals.\n"
            "mem/device: XLA's plan for one device's program, temp + arguments + outputs; "
            "RSS: the whole process's peak (all its devices, JAX runtime included)."
        )
    return out


if __name__ == "__main__":
    main()
