"""``diffsim diagnose``: the gradient doctor on the built-in systems, and its battery."""

from __future__ import annotations

from enum import Enum

import jax
import jax.numpy as jnp
import typer
from rich.table import Table

from ..battery import battery_table, run_battery
from ..diagnose import Diagnosis, diagnose, diagnose_rollout
from ..systems import bouncing_ball as bb
from ..systems import double_pendulum, free_particle, pendulum
from ..systems import projectile_wall as pw
from ..systems import stiff_contact as sc
from ._common import app, console, handle_errors, print_json, require_finite


class DoctorSystem(str, Enum):
    wall = "wall"
    bounce = "bounce"
    stiff = "stiff"
    double_pendulum = "double-pendulum"
    pendulum = "pendulum"
    free_particle = "free-particle"


def _run(system: DoctorSystem, v0, k, steps, toi, sigma, samples, key) -> Diagnosis:
    opts = {"num_samples": samples}
    if sigma is not None:
        opts["sigma"] = sigma
    if system is DoctorSystem.wall:
        lo, hi = 4.0, pw.V0_MAX
        if not lo <= v0 <= hi:
            raise ValueError(f"v0 must be in [{lo}, {hi}] m/s, got {v0}")
        return diagnose(pw.loss, jnp.asarray(v0), key, **opts)
    if system is DoctorSystem.bounce:
        sys = bb.bouncing_ball(h=1 / 240, toi=toi)
        T = steps or 240
        return diagnose_rollout(sys.step, sys.s0, sys.theta, T, lambda s: s[0], key, wrt="s0",
                                **opts)  # fmt: skip
    if system is DoctorSystem.stiff:
        if not k > 0:
            raise ValueError(f"k must be finite and > 0, got {k}")
        sys = sc.stiff_contact(k=k)
        T = steps or 240
        return diagnose_rollout(sys.step, sys.s0, sys.theta, T, lambda s: s[0], key, wrt="s0",
                                **opts)  # fmt: skip
    if system is DoctorSystem.double_pendulum:
        sys = double_pendulum()
        T = steps or 800
        return diagnose_rollout(
            sys.step, sys.s0, sys.theta, T, lambda s: jnp.cos(s[0][1]), key, wrt="s0", **opts
        )
    if system is DoctorSystem.pendulum:
        sys = pendulum(h=0.01, angle0=2.5, damping=0.1)
        T = steps or 1000
        return diagnose_rollout(sys.step, sys.s0, sys.theta, T, lambda s: s[0] ** 2, key,
                                wrt="s0", **opts)  # fmt: skip
    sys = free_particle(h=1 / 60, v0=3.0)
    T = steps or 120
    return diagnose_rollout(sys.step, sys.s0, sys.theta, T, lambda s: (s[0] - 1.0) ** 2, key,
                            wrt="s0", **opts)  # fmt: skip


@app.command("diagnose")
@handle_errors
def diagnose_cmd(
    system: DoctorSystem = typer.Option(DoctorSystem.wall, "--system", help="System to examine."),
    v0: float = typer.Option(8.0, "--v0", help="wall: launch speed in m/s, in [4, 14]."),
    k: float = typer.Option(1e5, "--k", help="stiff: penalty stiffness in N/m (> 0)."),
    steps: int = typer.Option(0, "--steps", help="Rollout horizon T (0: the system's default)."),
    toi: bool = typer.Option(True, "--toi/--no-toi", help="bounce: time-of-impact correction."),
    sigma: float = typer.Option(
        None, "--sigma", help="Smoothing scale σ (> 0; default 5% of |θ|)."
    ),
    samples: int = typer.Option(256, "--samples", help="Samples per estimator family (>= 16)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    battery: bool = typer.Option(False, "--battery", help="Run the validation battery instead."),
    held_out: bool = typer.Option(
        False, "--held-out", help="With --battery: the held-out cases instead."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Can the exact gradient be trusted here? Flags (plateau, jump, stiffness, chaos,
    non_finite) with their evidence, a verdict and a recommendation."""
    if battery:
        rows = run_battery(seed, which="held_out" if held_out else "calibration")
        if json_out:
            print_json({"cases": rows})
        else:
            typer.echo(battery_table(rows))
        return
    require_finite("v0", v0)
    require_finite("k", k)
    if sigma is not None:
        require_finite("sigma", sigma)
        if sigma <= 0:
            raise ValueError(f"sigma must be finite and > 0, got {sigma}")
    if steps < 0:
        raise ValueError(f"steps must be an integer >= 8 (or 0 for the default), got {steps}")
    if 0 < steps < 8:
        raise ValueError(f"steps must be an integer >= 8 (or 0 for the default), got {steps}")
    d = _run(system, v0, k, steps, toi, sigma, samples, jax.random.PRNGKey(seed))
    if json_out:
        print_json(d.to_dict())
        return
    colour = "green" if d.verdict == "trusted" else "red"
    console.print(f"[bold {colour}]{d.verdict}[/]  ({system.value})")
    if d.flags:
        table = Table("flag", "why", "evidence")
        for f in d.flags:
            ev = ", ".join(f"{name}={val:.3g}" if isinstance(val, float) else f"{name}={val}"
                           for name, val in f.evidence.items())  # fmt: skip
            table.add_row(f.name, f.message, ev)
        console.print(table)
    console.print(f"[bold]recommendation:[/] {d.recommendation}", highlight=False)
    ev = d.evaluations
    console.print(f"cost: {ev['loss']} loss + {ev['grad']} gradient evaluations", highlight=False)
