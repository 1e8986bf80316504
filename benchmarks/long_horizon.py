"""Long horizons: gradient through 10^3 ... 10^6 steps, with and without checkpointing.

A system of 1,000 independent particles on hardening springs (semi-implicit Euler, float32)
is rolled out for T steps and the gradient of a loss on the final state with respect to the
stiffnesses (1,000 parameters) and the initial state is taken by reverse mode. Each case runs
in a fresh subprocess, which reports its own peak resident memory (VmHWM) and times.

    python -m benchmarks.long_horizon [--max-plain 100000] [--json]

Plain reverse mode stores every step's residuals (memory O(T)); ``checkpoint="sqrt"`` stores
a state every ~sqrt(T) steps and recomputes the rest (memory O(sqrt T), about one extra
forward pass).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

N_PARTICLES = 1000
H = 1e-3


def _peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM). Not ``ru_maxrss``: Linux carries that over
    ``exec`` from the parent, so a child of a big process would report the parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _child(num_steps: int, checkpoint: str) -> dict:
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak to the current RSS
        f.write("5")

    import jax
    import jax.numpy as jnp

    from diffsim import rollout
    from diffsim.integrators import SemiImplicitEuler

    base_rss = _peak_rss_kib()

    step = SemiImplicitEuler(lambda x, v, th: -th["k"] * x - 0.5 * x**3 - 0.01 * v, h=H)
    key = jax.random.PRNGKey(0)
    x0 = jax.random.uniform(key, (N_PARTICLES,), minval=-1.0, maxval=1.0)
    s0 = (x0, jnp.zeros(N_PARTICLES))
    theta = {"k": jnp.linspace(1.0, 4.0, N_PARTICLES)}
    ckpt = None if checkpoint == "none" else checkpoint

    @jax.jit
    def grad(s0, theta):
        def loss(s0, theta):
            x, v = rollout(step, s0, theta, num_steps, trajectory=False, checkpoint=ckpt)
            return jnp.sum(x**2) + 0.1 * jnp.sum(v**2)

        return jax.grad(loss, argnums=(0, 1))(s0, theta)

    t0 = time.perf_counter()
    jax.block_until_ready(grad(s0, theta))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = jax.block_until_ready(grad(s0, theta))
    second = time.perf_counter() - t0
    finite = bool(jnp.all(jnp.isfinite(g[1]["k"])))
    peak_kib = _peak_rss_kib()
    return {
        "steps": num_steps,
        "checkpoint": checkpoint,
        "first_call_s": first,
        "time_s": second,
        "peak_rss_mib": peak_kib / 1024,
        "rss_after_import_mib": base_rss / 1024,
        "grad_finite": finite,
    }


def run_case(num_steps: int, checkpoint: str, timeout: float = 1800) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.long_horizon", "--child", str(num_steps), checkpoint]
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"steps": num_steps, "checkpoint": checkpoint, "error": f"timeout {timeout}s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["killed"]
        return {
            "steps": num_steps,
            "checkpoint": checkpoint,
            "error": f"exit {proc.returncode}: {tail[0][:200]}",
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None, quiet: bool = False) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--max-steps", type=int, default=10**6)
    parser.add_argument(
        "--max-plain",
        type=int,
        default=10**5,
        help="longest horizon run without checkpointing (longer ones are predicted, not run)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(int(args.child[0]), args.child[1])))
        return []

    rows = []
    T = 1000
    while T <= args.max_steps:
        for mode in ("none", "sqrt"):
            if mode == "none" and T > args.max_plain:
                prev = [r for r in rows if r["checkpoint"] == "none" and "peak_rss_mib" in r]
                pred = None
                if len(prev) >= 2:
                    a, b = prev[-2], prev[-1]
                    slope = (b["peak_rss_mib"] - a["peak_rss_mib"]) / (b["steps"] - a["steps"])
                    pred = b["peak_rss_mib"] + slope * (T - b["steps"])
                rows.append(
                    {
                        "steps": T,
                        "checkpoint": mode,
                        "error": "not run (--max-plain)",
                        "predicted_rss_mib": pred,
                    }
                )
                continue
            row = run_case(T, mode)
            rows.append(row)
            if not args.json:
                print(_fmt(row), flush=True)
            elif quiet:
                print(_fmt(row), file=sys.stderr, flush=True)
        T *= 10
    if quiet:
        return rows
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print()
        print(table(rows))
    return rows


def _fmt(r: dict) -> str:
    if "error" in r:
        return f"T={r['steps']:>8} {r['checkpoint']:>5}: {r['error']}"
    return (
        f"T={r['steps']:>8} {r['checkpoint']:>5}: {r['time_s']:.2f} s "
        f"(first call {r['first_call_s']:.2f} s), peak RSS {r['peak_rss_mib']:.0f} MiB"
    )


def table(rows: list[dict]) -> str:
    lines = [
        "| steps T | checkpointing | gradient time (s) | first call (s) | peak RSS (MiB) |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            pred = r.get("predicted_rss_mib")
            note = f"not run; predicted ≈ {pred:.0f}" if pred else r["error"]
            lines.append(f"| {r['steps']:,} | {r['checkpoint']} | — | — | {note} |")
        else:
            lines.append(
                f"| {r['steps']:,} | {r['checkpoint']} | {r['time_s']:.2f} | "
                f"{r['first_call_s']:.2f} | {r['peak_rss_mib']:.0f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
