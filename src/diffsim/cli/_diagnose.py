"""``diffsim diagnose``: the gradient doctor on the built-in systems, its battery, and on
your own MuJoCo model (``--mjcf``)."""

from __future__ import annotations

import math
from enum import Enum

import jax
import typer
from rich.table import Table

from ..doctor import Diagnosis, HalfStep
from ..systems import SYSTEMS
from ..systems.battery import PRESETS, battery_table, run_battery
from ._common import (
    DEVICES_HELP,
    CLIError,
    app,
    check_seed,
    console,
    print_json,
    progress_bar,
    registry_choice,
    use_devices,
    used,
)
from ._limits import (
    DOCTOR_BYTES_PER_SAMPLE_STEP,
    DOCTOR_S_PER_SAMPLE_STEP,
    check_cost,
    check_horizon,
)

WALL_HORIZON = 520
"""The wall's rollout at h = 1/240 s and 14 m/s (its loss is one rollout of this length)."""


def _show(val: object) -> str:
    if isinstance(val, float):
        return f"{val:.3g}" if math.isfinite(val) else "not finite"
    return str(val)


def _default_horizon(system: str) -> int:
    for setting in SYSTEMS[system].settings:
        if setting.name == "steps" and setting.default:
            return int(setting.default)
    return WALL_HORIZON


class MjcfInput(str, Enum):
    """What ``--mjcf`` differentiates with respect to."""

    qvel0 = "qvel0"
    qpos0 = "qpos0"
    ctrl = "ctrl"


MJCF_STEPS = 100
"""Default horizon of ``--mjcf``."""


def _parse_target(text: str) -> list[float]:
    try:
        xyz = [float(c) for c in text.split(",")]
    except ValueError:
        xyz = []
    if len(xyz) != 3:
        raise CLIError(f"target must be three numbers X,Y,Z (metres), got {text!r}")
    return [used("target", c) for c in xyz]


MJCF_DATA_COPIES = 20
"""``--mjcf``: bytes per sample besides the horizon, in copies of one ``mjx.Data`` (measured
on ``free_flight``: ~61 kB a sample at T = 5, 18 copies of its 3.4 kB Data)."""
MJCF_STATE_COPIES_PER_STEP = 4
"""``--mjcf``: bytes per sample and step, in copies of the state (qpos, qvel, ...; measured on
``free_flight``: 540 B a sample-step at T = 2³¹ − 1, 3.6 copies of its 152 B state)."""


def _mjcf_cost(step, steps: int, samples: int) -> tuple[float, float]:
    """Bytes and seconds of ``diagnose --mjcf`` for this model, from its own array sizes (an
    abstract trace of one ``mjx.Data``; nothing is compiled)."""
    import numpy as np

    def nbytes(tree) -> int:
        return sum(
            int(np.prod(a.shape)) * a.dtype.itemsize for a in jax.tree_util.tree_leaves(tree)
        )

    s0 = step.initial_state()
    data = nbytes(jax.eval_shape(step.data, s0))
    state = nbytes(s0)
    n = max(samples, 16)
    per_sample = MJCF_DATA_COPIES * data + steps * MJCF_STATE_COPIES_PER_STEP * state
    # an MJX step costs ~50x a built-in system's on CPU, plus compilation (tens of seconds)
    seconds = 30 + max(samples, 256) * steps * DOCTOR_S_PER_SAMPLE_STEP * 50
    return float(n) * per_sample, seconds


def _run_mjcf(
    path, steps, wrt, body, target, sigma, samples, key, quiet, devices=None, compare=True
):
    """Diagnose ‖p_T − target‖² of body ``body`` after ``steps`` MJX steps of the MJCF model
    at ``path``, with respect to ``wrt`` (the library's ``MjxStep.reach_loss``); returns
    (diagnosis, loss, grad, MJX's gap to MuJoCo C or None)."""

    import numpy as np

    import diffsim

    try:
        from ..engines import mjx
    except ImportError as err:
        raise CLIError(
            f"--mjcf needs MuJoCo MJX: pip install '.[mjx]' in a clone of diffsim ({err})"
        ) from None
    try:
        step = mjx.load(path)
    except (ValueError, TypeError) as err:
        raise CLIError(str(err)) from None
    if body is None and step.free_body() is None:
        raise CLIError(f"{path} has no body with a free joint: name one with --body")
    if wrt == MjcfInput.ctrl and step.nu == 0:
        raise CLIError(f"{path} has no actuators: --wrt ctrl has nothing to differentiate")
    goal = None if target is None else _parse_target(target)
    # before anything is compiled (or built), as for the built-in systems
    nbytes, seconds = _mjcf_cost(step, steps, samples)
    seconds = check_cost(f"--samples {samples} over {steps} steps of {path}", nbytes, seconds)
    try:
        problem = step.reach_loss(steps, wrt.value, body=body, target=goal)
    except ValueError as err:
        raise CLIError(str(err)) from None
    loss, x0 = problem.loss, problem.x0
    # the discretization check: the same loss at opt.timestep / 2 over 2T steps
    half = HalfStep(problem.half_step_loss, step.order, step.h)
    opts = {"num_samples": samples, "devices": devices, "half_step": half}
    if sigma is not None:
        opts["sigma"] = sigma
    with progress_bar(f"diagnose ({path})", 1, seconds, quiet) as advance:
        # is MJX's model MuJoCo's? (one compiled step along C's own trajectory)
        gap = step.compare_with_mujoco(mjx.COMPARE_STEPS) if compare else None
        d = diffsim.diagnose(loss, x0, key, **opts)
        advance()
    # the doctor's own L(x0) and ∇L(x0): a second gradient program would compile the rollout
    # again for the same numbers
    m = d.measurements
    return d, float(m["loss"]), [float(v) for v in np.ravel(m["grad"])], gap


def _settings(system: str, flags: dict, sets: list[str]) -> dict:
    """The preset's settings: each from ``--set NAME=VALUE`` (parsed and range-checked by
    the registry's :class:`~diffsim.estimators.Option`), else its own flag, else the
    registry's default. A name the system does not take is an error naming its settings."""
    settings = {s.name: s for s in SYSTEMS[system].settings}
    values = {name: flags.get(name, s.default) for name, s in settings.items()}
    for item in sets:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or name not in settings:
            takes = ", ".join(settings) or "none"
            raise CLIError(
                f"--set takes NAME=VALUE with NAME a setting of --system {system} ({takes}), "
                f"got {item!r}"
            )
        values[name] = settings[name].parse(text)
    return values


def _run(system: str, settings: dict, sigma, samples, key, devices) -> Diagnosis:
    opts = {"num_samples": samples, "devices": devices}
    if sigma is not None:
        opts["sigma"] = sigma
    return PRESETS[system].build(**settings)(key, **opts)


_MJCF_ONLY = ("wrt", "body", "target", "compare")
_BUILT_IN_ONLY = ("system", "v0", "k", "toi", "set_values", "battery", "held_out")
_SETTINGS = ("v0", "k", "steps", "toi")
"""The options that are a doctor preset's settings (each preset takes some of them)."""


def _flag(name: str) -> str:
    flags = {"toi": "--toi/--no-toi", "held_out": "--held-out", "set_values": "--set",
             "compare": "--compare/--no-compare"}  # fmt: skip
    return flags.get(name, f"--{name}")


def _refuse_options_that_do_not_apply(ctx: typer.Context, system: str) -> None:
    """Options given on the command line that the chosen mode would ignore are an error:
    ``--mjcf`` takes no built-in system's settings, ``--battery`` runs its fixed cases,
    ``--held-out`` only means something with ``--battery``, and a built-in system takes
    only its own settings (``--k`` is the stiff contact's)."""
    given = set()
    for name in ctx.params:  # Click's ParameterSource, compared by name (Typer vendors Click)
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.add(name)

    def refuse(names, mode: str, hint: str) -> None:
        bad = [n for n in names if n in given]
        if bad:
            flags = ", ".join(_flag(n) for n in bad)
            verb, it = ("does", "it") if len(bad) == 1 else ("do", "them")
            raise CLIError(f"{flags} {verb} not apply to {mode}; {hint.format(it=it)}")

    if "mjcf" in given:
        refuse(_BUILT_IN_ONLY, "--mjcf", "drop {it}, or leave out --mjcf for the built-in systems")
        return
    refuse(_MJCF_ONLY, "the built-in systems", "they are --mjcf's (your own MuJoCo model)")
    if "battery" in given and ctx.params.get("battery"):
        battery_takes = {"battery", "held_out", "seed", "devices", "json_out"}
        refuse(
            sorted(given - battery_takes),
            "--battery",
            "the battery runs its own fixed cases (it takes --held-out, --seed, --devices, --json)",
        )
        return
    if "held_out" in given:
        refuse(("held_out",), "a single system", "it selects the battery's cases: add --battery")
    settings = PRESETS[system].settings
    takes = ", ".join(_flag(n) for n in settings) or "none"
    refuse(
        [n for n in _SETTINGS if n not in settings],
        f"--system {system}",
        f"its settings are {takes} (--sigma, --samples, --seed for every system)",
    )


def _check_sampling(sigma: float | None, samples: int) -> float | None:
    """``--sigma`` as used (``None``: the doctor's own, 5 % of |θ|) and ``--samples``."""
    if sigma is not None:
        sigma = used("sigma", sigma)
        if sigma <= 0:
            raise CLIError(f"sigma must be finite and > 0, got {sigma}")
    if samples < 16:
        raise CLIError(f"samples must be an integer >= 16, got {samples}")
    return sigma


def _preset_settings(system: str, flags: dict, set_values: list[str] | None) -> dict:
    """The preset's settings (:func:`_settings`), with a horizon from ``--steps`` or
    ``--set steps=T`` checked: 0 (the system's default) or at least 8."""
    settings = _settings(system, flags, set_values or [])
    if "steps" in settings:  # from --steps or --set steps=T
        steps = int(settings["steps"] or 0)
        if steps != 0 and steps < 8:
            raise CLIError(f"steps must be an integer >= 8 (or 0 for the default), got {steps}")
        settings["steps"] = check_horizon(f"--steps {steps}", steps)
    return settings


def _print_diagnosis(d: Diagnosis, system: str) -> None:
    """The doctor's report as text: the verdict, a table of the flags (and the undecided
    ones), the recommendation and the cost."""
    colour = {"trusted": "green", "inconclusive": "yellow"}.get(d.verdict, "red")
    console.print(f"[bold {colour}]{d.verdict}[/]  ({system})")
    if d.flags or d.undecided:
        table = Table("flag", "why", "evidence")
        for f in d.flags:
            ev = ", ".join(f"{name}={_show(val)}" for name, val in f.evidence.items())
            table.add_row(f.name, f.message, ev)
        for f in d.undecided:  # neither raised nor ruled out within the sample budget
            ev = ", ".join(f"{name}={_show(val)}" for name, val in f.evidence.items())
            table.add_row(f"{f.name}?", f"undecided: {f.message}", ev)
        console.print(table)
    console.print(f"[bold]recommendation:[/] {d.recommendation}", highlight=False)
    console.print(f"cost: {d.cost}", highlight=False)


@app.command("diagnose")
def diagnose_cmd(
    ctx: typer.Context,
    system: str = typer.Option(
        "wall",
        "--system",
        help=f"System to examine, one of the doctor's presets: {', '.join(PRESETS)} (read "
        "from the registry when the command runs).",
    ),
    v0: float = typer.Option(8.0, "--v0", help="wall: launch speed in m/s, in [4, 14]."),
    k: float = typer.Option(1e5, "--k", help="stiff: penalty stiffness in N/m (> 0)."),
    steps: int = typer.Option(
        None,
        "--steps",
        help=f"Rollout horizon T (0: the system's default; --mjcf: >= 1, default {MJCF_STEPS}).",
    ),
    toi: bool = typer.Option(True, "--toi/--no-toi", help="bounce: time-of-impact correction."),
    set_values: list[str] = typer.Option(
        None,
        "--set",
        help="NAME=VALUE: a setting of --system, any of its registered settings (repeatable; "
        "e.g. --set v0=9.5); wins over the flag of the same name.",
    ),
    sigma: float = typer.Option(
        None, "--sigma", help="Smoothing scale σ (> 0; default 5% of |θ|)."
    ),
    samples: int = typer.Option(256, "--samples", help="Samples per estimator family (>= 16)."),
    seed: int = typer.Option(0, "--seed", help="PRNG seed."),
    battery: bool = typer.Option(False, "--battery", help="Run the validation battery instead."),
    held_out: bool = typer.Option(
        False, "--held-out", help="With --battery: the held-out cases instead."
    ),
    devices: int | None = typer.Option(None, "--devices", help=DEVICES_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    mjcf: str = typer.Option(
        None,
        "--mjcf",
        help="Your own MuJoCo model (MJCF file), stepped by MJX: diagnoses ‖p_T − target‖² of "
        "--body after --steps steps with respect to --wrt.",
    ),
    wrt: MjcfInput = typer.Option(
        MjcfInput.qvel0,
        "--wrt",
        help="--mjcf: the input differentiated, all its entries (a free joint's qvel0[0:3] is "
        "its linear velocity; ctrl: the whole (T, nu) control sequence).",
    ),
    body: str = typer.Option(
        None, "--body", help="--mjcf: the body whose position counts (default: first free body)."
    ),
    target: str = typer.Option(
        None, "--target", help="--mjcf: X,Y,Z in metres (default: the body's initial position)."
    ),
    compare: bool = typer.Option(
        True,
        "--compare/--no-compare",
        help="--mjcf: first compare MJX's step with MuJoCo C's mj_step along C's first 100 "
        "steps from the initial state, and say where MJX's model is not MuJoCo's (compiles "
        "one step: 5-10 s).",
    ),
) -> None:
    """Can the exact gradient be trusted here? Flags (plateau, jump, stiffness, chaos,
    non_finite) with their evidence, a verdict and a recommendation."""
    registry_choice("--system", system, PRESETS)
    _refuse_options_that_do_not_apply(ctx, system)
    devices, num_devices = use_devices(devices)  # first: before JAX starts its backend
    check_seed(seed)
    if mjcf is not None:
        _diagnose_mjcf(
            mjcf, steps, wrt, body, target, sigma, samples, seed, json_out, devices,
            num_devices, compare,
        )  # fmt: skip
        return
    steps = 0 if steps is None else steps
    if battery:
        rows = run_battery(seed, which="held_out" if held_out else "calibration")
        if json_out:
            print_json({"cases": rows, "devices": num_devices})
        else:
            typer.echo(battery_table(rows))
        return
    v0, k = used("v0", v0), used("k", k)
    sigma = _check_sampling(sigma, samples)
    settings = _preset_settings(system, {"v0": v0, "k": k, "steps": steps, "toi": toi}, set_values)
    horizon = int(settings.get("steps") or 0) or _default_horizon(system)
    seconds = check_cost(
        f"--samples {samples} over {horizon} steps",
        samples * horizon * DOCTOR_BYTES_PER_SAMPLE_STEP,
        max(samples, 256) * horizon * DOCTOR_S_PER_SAMPLE_STEP,
    )
    with progress_bar(f"diagnose ({system})", 1, seconds, json_out) as advance:
        d = _run(system, settings, sigma, samples, jax.random.PRNGKey(seed), devices)
        advance()
    if json_out:
        print_json({**d.to_dict(), "devices": num_devices})
        return
    _print_diagnosis(d, system)


def _diagnose_mjcf(
    mjcf, steps, wrt, body, target, sigma, samples, seed, json_out, devices=None,
    num_devices=1, compare=True,
) -> None:  # fmt: skip
    """``diffsim diagnose --mjcf``: checks, then the doctor on the model, then the report."""
    steps = MJCF_STEPS if steps is None else steps
    if steps < 1:
        raise CLIError(f"steps must be an integer >= 1 with --mjcf, got {steps}")
    steps = check_horizon(f"--steps {steps}", steps)
    sigma = _check_sampling(sigma, samples)
    key = jax.random.PRNGKey(seed)
    d, loss, grad, gap = _run_mjcf(
        mjcf, steps, wrt, body, target, sigma, samples, key, json_out, devices, compare
    )
    if json_out:
        print_json(
            {
                "verdict": d.verdict,
                "flags": list(d.flag_names),
                "recommendation": d.recommendation,
                "evaluations": dict(d.evaluations),
                "loss": loss,
                "grad": grad,
                "devices": num_devices,
                "mujoco_gap": None if gap is None else dict(gap._asdict(), differs=gap.differs),
            }
        )
        return
    colour = {"trusted": "green", "inconclusive": "yellow"}.get(d.verdict, "red")
    console.print(f"[bold {colour}]{d.verdict}[/]  ({mjcf})", highlight=False)
    if d.flags:
        table = Table("flag", "why", "evidence")
        for f in d.flags:
            ev = ", ".join(f"{name}={_show(val)}" for name, val in f.evidence.items())
            table.add_row(f.name, f.message, ev)
        console.print(table)
    if gap is not None:
        mark = "[bold red]warning:[/] " if gap.differs else ""
        console.print(f"{mark}{gap}", highlight=False)
    console.print(f"[bold]recommendation:[/] {d.recommendation}", highlight=False)
    console.print(f"loss {_show(loss)}, gradient {[_show(v) for v in grad]}", highlight=False)
    ev = d.evaluations
    console.print(f"cost: {ev['loss']} loss + {ev['grad']} gradient evaluations", highlight=False)
