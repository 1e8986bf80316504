"""``python -m benchmarks``: diffsim against its peers on one task, side by side.

    python -m benchmarks [--quick] [--json] [--frameworks diffsim,jax,...] [--figure PATH]

Runs every framework in alternation (A B C ... per round, several rounds) on the bouncing
balls task of :mod:`benchmarks.task`, and prints per case the median time, ball-steps per
second, first-call (compile) time, peak memory, gradient agreement with diffsim and each
peer's time divided by diffsim's from the same rounds; then the machine floor, the cost of
the AoBG and ZoBG estimators, and the long-horizon memory table
(:mod:`benchmarks.long_horizon`). ``--quick`` runs small cases, few rounds, no memory
subprocesses and no long-horizon table (under ~2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import _harness as H
from .task import Case

FULL_SIZES = (1, 4096, 65536)
QUICK_SIZES = (1, 512)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small N and T, 3 rounds (< ~2 min)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.add_argument("--frameworks", default=",".join(H.FRAMEWORKS), help="comma-separated")
    p.add_argument("--sizes", default=None, help="comma-separated N (default 1,4096,65536)")
    p.add_argument("--steps", type=int, default=None, help="T (default 1000; --quick 200)")
    p.add_argument("--rounds", type=int, default=None, help="alternation rounds (5; quick 3)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-framework subprocesses")
    p.add_argument("--no-estimators", action="store_true")
    p.add_argument("--no-long-horizon", action="store_true")
    p.add_argument("--long-max-steps", type=int, default=10**6)
    p.add_argument("--figure", default=None, help="write the throughput figure (PNG) here")
    p.add_argument("--mem-child", nargs=4, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run(argv: list[str] | None = None, log=None) -> dict:
    """Run the benchmark; returns the results dict (also printed unless ``log`` is silent)."""
    args = parse(argv)
    note = H.set_xla_flags()
    if args.mem_child:
        name, n, steps, mode = args.mem_child
        print(json.dumps(H._mem_child(name, int(n), int(steps), mode)))
        return {}
    if log is None:
        log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    json_fd = None
    if args.json:
        # the peers print banners on stdout (some from C): keep stdout for the JSON alone
        sys.stdout.flush()
        json_fd = os.dup(1)
        os.dup2(2, 1)
    quick = args.quick
    sizes = (
        tuple(int(s) for s in args.sizes.split(","))
        if args.sizes
        else (QUICK_SIZES if quick else FULL_SIZES)
    )
    steps = args.steps or (200 if quick else 1000)
    rounds = args.rounds or (3 if quick else 5)
    frameworks = tuple(f.strip() for f in args.frameworks.split(",") if f.strip())
    unknown = set(frameworks) - set(H.FRAMEWORKS)
    if unknown:
        raise SystemExit(f"unknown frameworks {sorted(unknown)}; choose from {H.FRAMEWORKS}")
    results: dict = {
        "command": "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:]),
        "versions": H.versions(),
        "xla_flags": H.XLA_FLAGS,
        "diffsim_options": H.DIFFSIM_OPTIONS,
        "notes": [note] if note else [],
        "cases": [],
    }
    log(f"machine: {results['versions']['machine']}, {results['versions']['cores']} cores")
    machine = H.machine_floor()
    results["machine_floor"] = machine
    log(
        f"measured: memory bandwidth {machine['bandwidth_Bps'] / 1e9:.1f} GB/s (NumPy copy), "
        f"FLOP rate {machine['flops'] / 1e9:.1f} GFLOP/s ({machine['flops_note']})"
    )
    for n in sizes:
        case = Case(n, steps)
        log(f"\n== N = {n} balls, T = {steps} steps ({rounds} alternated rounds) ==")
        res = H.run_case(case, frameworks, rounds, log, memory=not (quick or args.no_memory))
        res["floor"] = H.floor_for(case, machine)
        results["cases"].append(res)
        log(format_case(res))
    if not args.no_estimators:
        log("\n== estimator cost on projectile_wall ==")
        est = H.estimator_cost(num_samples=1024, rounds=3 if quick else 7)
        results["estimators"] = est
        log(format_estimators(est))
    if not (quick or args.no_long_horizon):
        from . import long_horizon

        log("\n== long-horizon gradient memory (benchmarks.long_horizon) ==")
        rows = long_horizon.main(["--max-steps", str(args.long_max_steps), "--json"], quiet=True)
        results["long_horizon"] = rows
        log(long_horizon.table(rows))
    if args.figure:
        from ._report import throughput_figure

        throughput_figure(results, args.figure)
        log(f"\nfigure written to {args.figure}")
    if json_fd is not None:
        sys.stdout.flush()
        os.dup2(json_fd, 1)
        os.close(json_fd)
        print(json.dumps(results, indent=1, default=float), flush=True)
    return results


def _fmt_t(t: float | None) -> str:
    if t is None:
        return "—"
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def format_case(res: dict) -> str:
    """Plain-text table of one case."""
    rows = res["rows"]
    head = (
        f"{'framework':<11} {'fwd':>9} {'fwd bs/s':>9} {'grad':>9} {'grad bs/s':>9} "
        f"{'1st grad':>9} {'peak MiB':>9} {'fwd/ds':>7} {'grad/ds':>7}  gradient vs diffsim"
    )
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        ga = r.get("gradient_agreement")
        agree = (
            f"max rel {ga['max_rel_diff']:.1e}; {ga['balls_differing']} balls flip a flag "
            f"(others ≤ {ga['max_rel_diff_agreeing']:.1e})"
            if ga
            else "—"
        )
        peak = r.get("gradient_peak_mib", r.get("forward_peak_mib"))
        lines.append(
            f"{name:<11} {_fmt_t(r.get('forward_s')):>9} "
            f"{r.get('forward_ball_steps_per_s', 0):>9.2e} {_fmt_t(r.get('gradient_s')):>9} "
            f"{r.get('gradient_ball_steps_per_s', 0):>9.2e} "
            f"{_fmt_t(r.get('first_gradient_s', r.get('first_forward_s'))):>9} "
            f"{'—' if peak is None else f'{max(peak, 0.0):.0f}':>9} "
            f"{r.get('forward_ratio_to_diffsim', float('nan')):>7.2f} "
            f"{r.get('gradient_ratio_to_diffsim', float('nan')):>7.2f}  {agree}"
        )
    for name, err in res["errors"].items():
        lines.append(f"{name:<11} not run: {err}")
    fl = res["floor"]
    ds = rows.get("diffsim", {})
    for mode in ("forward", "gradient"):
        f = fl[mode]
        mult = ds.get(f"{mode}_s", float("nan")) / f["floor_s"]
        lines.append(
            f"floor {mode}: {f['flops_per_ball_step']:.0f} FLOP and "
            f"{f['bytes_per_ball_step']:.3g} B per ball-step -> {_fmt_t(f['floor_s'])}; "
            f"diffsim is {mult:.1f}x the floor"
        )
    return "\n".join(lines)


def format_estimators(est: dict) -> str:
    if "error" in est:
        return f"skipped: {est['error']}"
    return (
        f"{est['num_samples']} samples: batched forward {_fmt_t(est['batched_forward_s'])}, "
        f"ZoBG {_fmt_t(est['zobg_s'])} ({est['zobg_multiple']:.2f}x), "
        f"AoBG with {est['num_samples']} of each {_fmt_t(est['aobg_s'])} "
        f"({est['aobg_multiple']:.2f}x), AoBG with {est['num_samples'] // 2} of each "
        f"{_fmt_t(est['aobg_half_s'])} ({est['aobg_half_multiple']:.2f}x)"
    )


def main(argv: list[str] | None = None) -> None:
    run(argv)


if __name__ == "__main__":
    main()
