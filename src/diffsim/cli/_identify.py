"""``diffsim identify`` and ``diffsim record``: fit a model to a recording, and make one.

A thin shell over :func:`diffsim.identify`,
:func:`diffsim.identification.simulate_recording` and the recording files
(:func:`diffsim.load_recording`, :func:`diffsim.save_recording`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import typer

from ..identification import FULL_COVARIANCE_MAX, MATRIX_FREE_ABOVE, SOLVERS
from ..systems import SYSTEMS
from ._common import (
    CLIError,
    app,
    check_count,
    check_seed,
    check_writable,
    console,
    print_json,
    progress_bar,
    registry_choice,
    titled_table,
)

MAX_STEPS = 10_000
"""``--steps`` / ``--max-steps`` at most (a recording longer than this is for the API)."""


class _Model:
    """The step, its θ and how a recording's rows become its state and inputs."""

    def __init__(self, system: str | None, mjcf: str | None, fields: list[str]):
        if (system is None) == (mjcf is None):
            raise CLIError("give exactly one of --system NAME and --mjcf MODEL.xml")
        self.mj_model = None
        if mjcf is not None:
            try:
                from ..engines import mjx
            except ImportError as err:  # pragma: no cover - the extra is not installed
                msg = f"--mjcf needs MuJoCo MJX (pip install '.[mjx]' in a clone of diffsim): {err}"
                raise CLIError(msg) from None
            step = mjx.load(mjcf)
            self.step: Any = step
            self.mj_model = step.mj_model
            self.theta = step.theta(*dict.fromkeys(fields)) if fields else step.theta("gravity")
            self.s0 = step.initial_state()
            self.initial_state = step.initial_state
            self.control = None
            self.nu = step.nu
            self.check_physical = step.check_physical
            self.u0 = None  # an MJX step takes no control as zero control
        else:
            assert system is not None
            sys = SYSTEMS[system].factory()
            self.step, self.s0 = sys.step, sys.s0
            if not isinstance(sys.theta, dict):  # pragma: no cover - every system has a dict
                raise CLIError(f"system {system!r} has no named parameters")
            self.theta = dict(sys.theta)
            shapes = [np.shape(a) for a in jax.tree_util.tree_leaves(sys.s0)]
            if len(shapes) != 2:  # pragma: no cover - every built-in state is (x, v)
                raise CLIError(f"system {system!r} has no (position, velocity) state")
            self.initial_state = lambda q, v: (
                jnp.asarray(q).reshape(shapes[0]),
                jnp.asarray(v).reshape(shapes[1]),
            )
            self.control = lambda u: u[:, 0] if u.shape[1] == 1 else u  # built-ins: scalar u
            self.nu = 1
            self.check_physical = sys.check_physical
            self.u0 = sys.u0  # a step that takes an input (mass-spring's force): its rest value


def _fields(spec: str) -> list[str]:
    return [s.strip().split(":")[0].split("[")[0] for s in spec.split(",") if s.strip()]


def _pairs(option: str, text: str | None) -> dict[str, str]:
    """``name=value,name=value`` (names may hold commas inside brackets: ``g[1,0]=2``)."""
    import re

    out: dict[str, str] = {}
    for item in re.split(r",(?![^\[]*\])", text or ""):
        if not item.strip():
            continue
        if "=" not in item:
            raise CLIError(f"{option} takes name=value pairs separated by commas, got {item!r}")
        name, value = item.split("=", 1)
        out[name.strip()] = value.strip()
    return out


def _number(option: str, name: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise CLIError(f"{option} {name}={text!r}: not a number") from None
    if math.isnan(v):
        raise CLIError(f"{option} {name}: must be a number, got nan")
    return v


def _bounds(text: str | None) -> dict[str, tuple[float, float]]:
    out = {}
    for name, value in _pairs("--bounds", text).items():
        parts = value.split(":")
        if len(parts) != 2:
            raise CLIError(f"--bounds {name}={value!r}: write LOWER:UPPER (inf for none)")
        lo, hi = (_number("--bounds", name, p) for p in parts)
        out[name] = (lo, hi)
    return out


def _with_values(model: _Model, values: dict[str, str]) -> dict[str, Any]:
    """The model's θ with ``--set``'s values put in."""
    from ..identification import parse_parameters

    theta = dict(model.theta)
    if values:
        for p in parse_parameters(list(values), theta, model=model.mj_model):
            v = _number("--set", p.label, values[p.label])
            theta[p.field] = jnp.asarray(theta[p.field]).at[p.index].set(v)
    return theta


def _verdict(res: Any) -> str:
    """One line for a :class:`diffsim.IdentifyResult`: identified or not, and how."""
    if res.unidentifiable:
        verdict = "not identifiable: " + ", ".join(res.unidentifiable)
    else:
        verdict = "identified" if res.converged else "not converged"
        if res.jacobian_trusted is False:
            verdict += " (the exact Jacobian at the estimate disagrees with finite differences)"
        if res.jacobian == "smoothed":
            verdict += " with the smoothed Jacobian"
        elif res.windows > 1 and res.actions:
            verdict += " by multiple shooting (the doctor's choice)"
    return verdict


def _print_fit(res: Any, verdict: str) -> None:
    """A :class:`diffsim.IdentifyResult` as text: the estimates' table, the residual and
    cost, the windows of multiple shooting and the doctor's notes."""
    table = titled_table(f"identify: {verdict} ({res.message.split('; ')[0]})")
    for col in ("parameter", "estimate", "std error", "95 % interval", "start"):
        table.add_column(col)
    for n in res.names:
        computed = not math.isnan(res.std_error[n])  # matrix-free: only --intervals-for's
        table.add_row(
            n,
            f"{res.theta[n]:.6g}",
            f"{res.std_error[n]:.3g}" if computed else "not computed",
            f"[{res.interval_low[n]:.6g}, {res.interval_high[n]:.6g}]" if computed else "—",
            f"{res.start[n]:.6g}",
        )
    console.print(table)
    console.print(
        f"residual RMS {res.residual:.4g} (start {res.residual_start:.4g}) over "
        f"{res.num_samples} samples; {res.iterations} iterations, {res.evaluations} "
        f"rollouts with Jacobians ({res.rollout_equivalents} rollout-equivalents), "
        f"{res.seconds:.2f} s"
    )
    if res.windows > 1:
        console.print(
            f"multiple shooting: {res.windows} windows per recording, largest continuity "
            f"defect {res.continuity_defect:.3g}"
        )
    for note in res.trust_notes:
        console.print(note)


@app.command()
def identify(
    data: Path = typer.Option(..., "--data", help="The recording: a .npz or .csv file."),
    fit: str = typer.Option(
        ...,
        "--fit",
        help="Parameters to fit, comma-separated: 'k', 'm[1]', or for --mjcf "
        "'body_mass:torso,geom_friction:floor,dof_damping:hinge'.",
    ),
    system: str | None = typer.Option(None, "--system", help="A built-in system."),
    mjcf: str | None = typer.Option(None, "--mjcf", help="A MuJoCo model (MJCF file)."),
    bounds: str | None = typer.Option(
        None, "--bounds", help="name=LOWER:UPPER,... (inf for none), e.g. 'e=0:1,g=0:inf'."
    ),
    start: str | None = typer.Option(
        None, "--start", help="name=VALUE,... starting values (default: the model's)."
    ),
    set_: str | None = typer.Option(
        None, "--set", help="name=VALUE,... fixed parameter values (default: the model's)."
    ),
    signals: str | None = typer.Option(
        None, "--signals", help="The recorded signals to fit, e.g. 'qpos' (default: all)."
    ),
    max_steps: int = typer.Option(100, "--max-steps", help="Levenberg–Marquardt steps at most."),
    shooting: int = typer.Option(
        0,
        "--shooting",
        help="Multiple shooting: windows of this many steps, their starts fitted too (for "
        "long or chaotic recordings; 0: one rollout over the whole recording).",
    ),
    trust: str = typer.Option(
        "act",
        "--trust",
        help="What the fit does when the doctor does not trust the exact Jacobian: 'act' "
        "(switch to multiple shooting or to a smoothed Jacobian, and say so), 'report' (say "
        "so only) or 'off' (no check).",
    ),
    solver: str = typer.Option(
        "auto",
        "--solver",
        help=f"Levenberg–Marquardt's linear algebra, one of {', '.join(SOLVERS)}: 'dense' forms "
        "the Jacobian (one forward-mode tangent per parameter), 'matrix_free' never does "
        "(products by jvp/vjp, steps by conjugate gradients: cost flat in the parameters); "
        f"'auto' goes matrix-free above {MATRIX_FREE_ABOVE} fitted parameters.",
    ),
    intervals_for: str | None = typer.Option(
        None,
        "--intervals-for",
        help="Matrix-free only: the fitted parameters, comma-separated, whose 95 % intervals "
        "to compute (default: all of them up to "
        f"{FULL_COVARIANCE_MAX}; the others are shown as not computed).",
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object (the same run twice prints the same object, but for its "
        "'seconds', the wall time).",
    ),
) -> None:
    """Fit parameters of a model so that it reproduces a recording: Levenberg–Marquardt with
    the exact Jacobian through the rollout; estimates with 95 % intervals."""
    from .. import identify as fit_model
    from .. import load_recording
    from ..identification import parse_parameters

    check_count("max-steps", max_steps, 1, MAX_STEPS, "a fit's iterations")
    check_count("shooting", shooting, 0, 10**6, "a window's steps")
    if trust not in ("act", "report", "off"):
        raise CLIError(f"--trust must be one of act, report, off, got {trust!r}")
    if solver not in SOLVERS:
        raise CLIError(f"--solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    named = None
    if intervals_for is not None:
        named = [k.strip() for k in intervals_for.split(",") if k.strip()]
        if not named:
            raise CLIError("--intervals-for: give at least one fitted parameter's name")
    values = _pairs("--set", set_)
    model = _Model(
        None if system is None else registry_choice("--system", system, SYSTEMS),
        mjcf,
        _fields(fit) + _fields(",".join(values)),
    )
    theta = _with_values(model, values)
    chosen = None if signals is None else [k.strip() for k in signals.split(",") if k.strip()]
    rec = load_recording(
        data, initial_state=model.initial_state, control=model.control, signals=chosen
    )
    starts = {k: _number("--start", k, v) for k, v in _pairs("--start", start).items()}
    params = parse_parameters(
        fit, theta, model=model.mj_model, bounds=_bounds(bounds), start=starts
    )
    with progress_bar("identify", 1, 10.0, json_out) as advance:
        res = fit_model(
            model.step,
            rec,
            theta,
            params,
            max_steps=max_steps,
            shooting=shooting or None,
            trust=trust,
            solver=solver,
            intervals_for=named,
        )
        advance()
    verdict = _verdict(res)
    if json_out:
        out = res.to_dict()
        out["verdict"] = verdict
        print_json(out)
        return
    _print_fit(res, verdict)


@app.command()
def record(
    out: Path = typer.Option(..., "--out", help="Where to write: a .npz or .csv path."),
    system: str | None = typer.Option(None, "--system", help="A built-in system."),
    mjcf: str | None = typer.Option(None, "--mjcf", help="A MuJoCo model (MJCF file)."),
    steps: int = typer.Option(200, "--steps", "-T", help="Steps to record (1 to 10000)."),
    set_: str | None = typer.Option(
        None, "--set", help="name=VALUE,... the true parameters, e.g. 'body_mass:box=1.3'."
    ),
    noise: float = typer.Option(0.0, "--noise", help="σ of Gaussian noise on the signals."),
    ctrl: float = typer.Option(
        0.0, "--ctrl", help="σ of random controls (one per step and actuator; 0: none)."
    ),
    seed: int = typer.Option(0, "--seed", help="PRNG seed of the noise and the controls."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Record synthetic data: simulate a model at chosen parameter values (with noise) and
    write a recording that `diffsim identify` reads — to try identification without a
    robot."""
    from .. import save_recording
    from ..identification import simulate_recording

    check_count("steps", steps, 1, MAX_STEPS, "a recording for the CLI")
    check_seed(seed)
    for name, v in (("noise", noise), ("ctrl", ctrl)):
        if not (math.isfinite(v) and v >= 0):
            raise CLIError(f"--{name} must be a finite standard deviation >= 0, got {v}")
    check_writable(out, "--out", suffix=None)
    if out.suffix not in (".npz", ".csv"):
        raise CLIError(f"--out must end in .npz or .csv, got {str(out)!r}")
    values = _pairs("--set", set_)
    model = _Model(
        None if system is None else registry_choice("--system", system, SYSTEMS),
        mjcf,
        _fields(",".join(values)),
    )
    theta = _with_values(model, values)
    try:
        model.check_physical(theta)
    except ValueError as err:
        raise CLIError(f"--set: {err}") from None
    key_noise, key_ctrl = jax.random.split(jax.random.key(seed))
    inputs = None
    if ctrl > 0:
        u = ctrl * jax.random.normal(key_ctrl, (steps, model.nu))
        inputs = model.control(u) if model.control is not None else u
    elif model.u0 is not None:  # no --ctrl: the input at rest on every step
        inputs = jnp.broadcast_to(model.u0, (steps, *jnp.shape(model.u0)))
    rec = simulate_recording(
        model.step, model.s0, theta, steps, inputs=inputs, noise=noise, key=key_noise
    )
    save_recording(out, rec)
    summary = {
        "out": str(out),
        "steps": steps,
        "signals": {k: list(np.shape(v)) for k, v in rec.signals.items()},
        "noise": noise,
        "ctrl": ctrl,
        "theta": {k: np.asarray(v).tolist() for k, v in theta.items()},
    }
    if json_out:
        print_json(summary)
    else:
        shapes = ", ".join(f"{k} {tuple(v)}" for k, v in summary["signals"].items())
        console.print(f"wrote {out}: {steps} steps, {shapes}, noise σ = {noise:g}")
