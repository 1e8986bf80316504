"""``python -m benchmarks``: diffsim against its peers on one task, side by side.

    python -m benchmarks [--quick] [--json] [--frameworks diffsim,jax,...] [--figure PATH]

Runs every framework in alternation (a fresh random order each round, an untimed warm call
before each timed one; 15 rounds) on the bouncing balls task of :mod:`benchmarks.task`, and
prints per case the median time ± the half-width of its 95 % confidence interval,
ball-steps per second, first-call (compile) time, peak memory, gradient agreement with
diffsim and the median of each peer's time divided by diffsim's in the same round, with its
interval; then the machine floor, the cost of the AoBG and ZoBG estimators, and the
long-horizon memory table (:mod:`benchmarks.long_horizon`). ``--quick`` runs small cases,
5 rounds, no memory subprocesses and no long-horizon table (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import _harness as H
from ._report import fmt_agreement, fmt_plain_time, fmt_ratio, fmt_sig, fmt_time
from .task import Case

FULL_SIZES = (1, 4096, 65536)
QUICK_SIZES = (1, 512)
ROUNDS, QUICK_ROUNDS = 15, 5
"""Alternation rounds: 15 give a 95 % interval of the median between the 4th and 12th of
the sorted times; 5 (--quick) only the full range, at 94 %."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small N and T, 5 rounds")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.add_argument(
        "--frameworks",
        default=",".join(H.FRAMEWORKS),
        help=f"comma-separated; extra rows: {','.join(H.EXTRA_FRAMEWORKS)}",
    )
    p.add_argument("--sizes", default=None, help="comma-separated N (default 1,4096,65536)")
    p.add_argument("--steps", type=int, default=None, help="T (default 1000; --quick 200)")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"alternation rounds ({ROUNDS}; quick {QUICK_ROUNDS})",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the per-framework subprocesses")
    p.add_argument("--no-estimators", action="store_true")
    p.add_argument("--no-long-horizon", action="store_true")
    p.add_argument("--long-max-steps", type=int, default=10**6)
    p.add_argument("--figure", default=None, help="write the throughput figure (PNG) here")
    p.add_argument("--mem-child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    # bad values are usage errors: one line and exit status 2, like argparse's own
    known = H.FRAMEWORKS + H.EXTRA_FRAMEWORKS
    unknown = {f.strip() for f in args.frameworks.split(",") if f.strip()} - set(known)
    if unknown:
        p.error(f"--frameworks: unknown {sorted(unknown)}; choose from {', '.join(known)}")
    if args.rounds is not None and args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.steps is not None and args.steps < 1:
        p.error(f"--steps must be >= 1, got {args.steps}")
    if args.sizes:
        try:
            sizes = [int(v) for v in args.sizes.split(",")]
        except ValueError:
            p.error(f"--sizes must be comma-separated integers >= 1, got {args.sizes!r}")
        if min(sizes) < 1:
            p.error(f"--sizes must be comma-separated integers >= 1, got {args.sizes!r}")
    return args


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
    rounds = args.rounds or (QUICK_ROUNDS if quick else ROUNDS)
    frameworks = tuple(f.strip() for f in args.frameworks.split(",") if f.strip())
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


def format_case(res: dict) -> str:
    """Plain-text table of one case: medians ± the half-width of their confidence interval,
    per-round ratios to diffsim as median (interval)."""
    rows = res["rows"]
    level = res.get("ci_level", H.CI_LEVEL)
    head = (
        f"{'framework':<11} {'thr':>3} {'fwd':>13} {'grad':>13} {'grad bs/s':>9} "
        f"{'1st grad':>8} {'peak MiB':>8} {'fwd/ds':>15} {'grad/ds':>15}  gradient vs diffsim"
    )
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        peak = r.get("gradient_peak_mib", r.get("forward_peak_mib"))
        gbs = r.get("gradient_ball_steps_per_s")
        lines.append(
            f"{name:<11} {r.get('threads') or '—':>3} "
            f"{fmt_time(r.get('forward_stats_s')):>13} "
            f"{fmt_time(r.get('gradient_stats_s')):>13} "
            f"{'—' if gbs is None else f'{gbs:.2g}':>9} "
            f"{fmt_plain_time(r.get('first_gradient_s', r.get('first_forward_s'))):>8} "
            f"{'—' if peak is None else f'{max(peak, 0.0):.0f}':>8} "
            f"{fmt_ratio(r.get('forward_ratio_stats')):>15} "
            f"{fmt_ratio(r.get('gradient_ratio_stats')):>15}  "
            f"{fmt_agreement(r.get('gradient_agreement'))}"
        )
    for name, err in res["errors"].items():
        lines.append(f"{name:<11} not run: {err}")
    cov = min(
        (r[k]["ci_coverage"] for r in rows.values() for k in r if k.endswith("_stats_s")),
        default=level,
    )
    lines.append(
        f"median of {res['rounds']} rounds ± half-width of its {cov:.0%} confidence interval "
        "(order statistics); ratios: median (interval) of the per-round time ÷ diffsim's; "
        "thr: threads"
    )
    fl = res["floor"]
    ds = rows.get("diffsim", {})
    for mode in ("forward", "gradient"):
        f = fl[mode]
        mult = ds.get(f"{mode}_s", float("nan")) / f["floor_s"]
        lines.append(
            f"floor {mode}: {f['flops_per_ball_step']:.0f} FLOP and "
            f"{f['bytes_per_ball_step']:.2g} B per ball-step -> {fmt_plain_time(f['floor_s'])}; "
            f"diffsim is {fmt_sig(mult)}x the floor"
        )
    return "\n".join(lines)


def format_estimators(est: dict) -> str:
    if "error" in est:
        return f"skipped: {est['error']}"
    return (
        f"{est['num_samples']} samples: batched forward "
        f"{fmt_plain_time(est['batched_forward_s'])}, "
        f"ZoBG {fmt_plain_time(est['zobg_s'])} ({est['zobg_multiple']:.2g}x), "
        f"AoBG with {est['num_samples']} of each {fmt_plain_time(est['aobg_s'])} "
        f"({est['aobg_multiple']:.2g}x), AoBG with {est['num_samples'] // 2} of each "
        f"{fmt_plain_time(est['aobg_half_s'])} ({est['aobg_half_multiple']:.2g}x)"
    )


def main(argv: list[str] | None = None) -> None:
    run(argv)


if __name__ == "__main__":
    main()
