"""Figures and Markdown tables from the results of :func:`benchmarks.__main__.run`."""

from __future__ import annotations

MARKERS = {
    "diffsim": "o",
    "jax": "s",
    "compiled-C": "*",
    "numpy": "x",
    "warp": "^",
    "taichi": "v",
    "torch": "D",
}


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
    """One Markdown table of every case and framework."""
    lines = [
        "| N | framework | forward | fwd+grad | fwd+grad ball-steps/s | first call (grad) "
        "| peak MiB (grad) | fwd ÷ diffsim | grad ÷ diffsim | gradient vs diffsim |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def t(v):
        if v is None:
            return "—"
        return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"

    for c in results["cases"]:
        for name, r in c["rows"].items():
            ga = r.get("gradient_agreement")
            agree = (
                f"{ga['max_rel_diff']:.1e} max; {ga['balls_differing']} flipped "
                f"(rest ≤ {ga['max_rel_diff_agreeing']:.0e})"
                if ga
                else "—"
            )
            peak = r.get("gradient_peak_mib", r.get("forward_peak_mib"))
            first = r.get("gradient_first_call_fresh_s", r.get("first_gradient_s"))
            fr = r.get("forward_ratio_to_diffsim")
            gr = r.get("gradient_ratio_to_diffsim")
            gbs = r.get("gradient_ball_steps_per_s")
            lines.append(
                f"| {c['n']:,} | {name} | {t(r.get('forward_s'))} | {t(r.get('gradient_s'))} "
                f"| {'—' if gbs is None else f'{gbs:.3g}'} | {t(first)} "
                f"| {'—' if peak is None else f'{peak:.0f}'} "
                f"| {'—' if fr is None else f'{fr:.2f}'} | {'—' if gr is None else f'{gr:.2f}'} "
                f"| {agree} |"
            )
        for name, err in c["errors"].items():
            lines.append(f"| {c['n']:,} | {name} | not run: {err} | | | | | | | |")
    return "\n".join(lines)
