"""Figures, tables and number formatting for the results of :func:`benchmarks.__main__.run`.

Every median is printed with no more digits than its confidence interval supports (two
significant digits, three when the interval is narrower than ±1 %), with its spread beside it.
"""

from __future__ import annotations

import math

MARKERS = {
    "diffsim": "o",
    "jax": "s",
    "compiled-C": "*",
    "numpy": "x",
    "warp": "^",
    "taichi": "v",
    "torch": "D",
    "warp-tape": "<",
}


def significant_digits(x: float, lo: float, hi: float) -> int:
    """How many significant digits of ``x`` its interval ``[lo, hi]`` supports: 2 or 3.

    >>> significant_digits(1.3, 1.2, 1.5), significant_digits(0.391, 0.390, 0.392)
    (2, 3)
    """
    half = max(hi - x, x - lo)
    if not math.isfinite(x) or x == 0 or half <= 0:
        return 3
    return 3 if half / abs(x) < 0.01 else 2


def fmt_sig(x: float | None, digits: int = 2) -> str:
    """``x`` to ``digits`` significant digits, in plain notation.

    >>> fmt_sig(154.3), fmt_sig(0.0391), fmt_sig(1.0), fmt_sig(12345.0, 3)
    ('150', '0.039', '1.0', '12300')
    """
    if x is None or not math.isfinite(x):
        return "—"
    if x == 0:
        return "0"
    x = float(f"{x:.{digits - 1}e}")  # round first: 9.96 -> 10, not 10.0
    exponent = math.floor(math.log10(abs(x)))
    decimals = digits - 1 - exponent
    if decimals <= 0:
        return f"{round(x, decimals):.0f}"
    return f"{x:.{decimals}f}"


def fmt_time(stats: dict | None) -> str:
    """A median time with its unit and the half-width of its confidence interval in %.

    >>> fmt_time({"median": 0.00391, "ci": [0.0038, 0.0041]})
    '3.9 ms ±5%'
    """
    if not stats:
        return "—"
    med, (lo, hi) = stats["median"], stats["ci"]
    d = significant_digits(med, lo, hi)
    unit, scale = (("s", 1.0) if med >= 1 else ("ms", 1e3)) if med >= 1e-3 else ("µs", 1e6)
    spread = max(hi - med, med - lo) / med * 100 if med > 0 else 0.0
    return f"{fmt_sig(med * scale, d)} {unit} ±{spread:.0f}%"


def fmt_plain_time(t: float | None) -> str:
    """A single time (no spread: a first call), 2 significant digits."""
    if t is None:
        return "—"
    if t >= 1:
        return f"{fmt_sig(t)} s"
    return f"{fmt_sig(t * 1e3)} ms" if t >= 1e-3 else f"{fmt_sig(t * 1e6)} µs"


def fmt_ratio(stats: dict | None) -> str:
    """A median ratio with its confidence interval.

    >>> fmt_ratio({"median": 1.34, "ci": [1.21, 1.52]})
    '1.3 (1.2–1.5)'
    """
    if not stats:
        return "—"
    med, (lo, hi) = stats["median"], stats["ci"]
    d = significant_digits(med, lo, hi)
    return f"{fmt_sig(med, d)} ({fmt_sig(lo, d)}–{fmt_sig(hi, d)})"


def fmt_agreement(ga: dict | None) -> str:
    """The gradient agreement of one row with diffsim's, in words."""
    if not ga:
        return "—"
    return (
        f"max rel {ga['max_rel_diff']:.0e}; {ga['balls_differing']} balls flip a flag "
        f"(others ≤ {ga['max_rel_diff_agreeing']:.0e})"
    )


def throughput_figure(results: dict, path: str) -> None:
    """Ball-steps per second against N for every framework (solid: gradient, dashed: fwd)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = []
    for case in results["cases"]:
        for name in case["rows"]:
            if name not in names:
                names.append(name)
    for i, name in enumerate(names):
        color = f"C{i}"
        for mode, style in (("gradient", "-"), ("forward", "--")):
            pts = [
                (c["n"], c["rows"][name][f"{mode}_ball_steps_per_s"])
                for c in results["cases"]
                if name in c["rows"] and f"{mode}_ball_steps_per_s" in c["rows"][name]
            ]
            if not pts:
                continue
            xs, ys = zip(*pts)
            label = f"{name} ({'fwd+grad' if mode == 'gradient' else 'forward'})"
            ax.plot(xs, ys, style, marker=MARKERS.get(name, "."), color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("N (balls)")
    ax.set_ylabel("ball-steps per second")
    steps = results["cases"][0]["steps"] if results["cases"] else "?"
    ax.set_title(f"Bouncing balls, T = {steps}: throughput (higher is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown_table(results: dict) -> str:
    """One Markdown table of every case and framework: medians ± the half-width of their
    confidence interval, ratios with the interval."""
    lines = [
        "| N | framework | threads | forward | fwd+grad | fwd+grad ball-steps/s "
        "| first call (grad) | peak MiB (grad) | fwd ÷ diffsim | grad ÷ diffsim "
        "| gradient vs diffsim |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in results["cases"]:
        for name, r in c["rows"].items():
            peak = r.get("gradient_peak_mib", r.get("forward_peak_mib"))
            first = r.get("gradient_first_call_fresh_s", r.get("first_gradient_s"))
            gbs = r.get("gradient_ball_steps_per_s")
            lines.append(
                f"| {c['n']:,} | {name} | {r.get('threads') or '—'} "
                f"| {fmt_time(r.get('forward_stats_s'))} "
                f"| {fmt_time(r.get('gradient_stats_s'))} "
                f"| {'—' if gbs is None else f'{gbs:.2g}'} | {fmt_plain_time(first)} "
                f"| {'—' if peak is None else f'{max(peak, 0.0):.0f}'} "
                f"| {fmt_ratio(r.get('forward_ratio_stats'))} "
                f"| {fmt_ratio(r.get('gradient_ratio_stats'))} "
                f"| {fmt_agreement(r.get('gradient_agreement'))} |"
            )
        for name, err in c["errors"].items():
            lines.append(f"| {c['n']:,} | {name} | | not run: {err} | | | | | | | |")
    return "\n".join(lines)
