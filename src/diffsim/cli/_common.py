"""Shared pieces of the CLI: the Typer app, one-line errors, precision, strict JSON output.

Every error the CLI reports is one line on stderr and exit code 2, whatever the input: the
library's ``ValueError``/``TypeError``, the CLI's own checks (:class:`CLIError`) and Click's
parse errors alike. A missing extra (the page's Dash, the figures' matplotlib) is one line
naming the pip command, exit code 1. Anything else is a bug in diffsim: one line, exit code 1.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

try:  # recent Typer vendors its own Click: its exceptions are the ones raised
    from typer import _click as click  # type: ignore[attr-defined]
except ImportError:  # older Typer (the oldest supported, 0.15.4) uses the click package
    import click
from typer.core import TyperGroup

from .. import MissingExtraError

# Click >= 8.2 raises this for a group called without a command; older Click prints the help
# itself (an empty tuple catches nothing)
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())

console = Console()


def registry_choice(option: str, value: str, registry: Mapping[str, Any]) -> str:
    """``value`` if it names an entry of ``registry`` (read now, when the command runs: an
    entry registered after import is a choice), else a :class:`CLIError` naming ``option``
    and the choices.

    Example:
        >>> registry_choice("--task", "pendulum", {"pendulum": 1, "tennis": 2})
        'pendulum'
        >>> registry_choice("--task", "golf", {"pendulum": 1, "tennis": 2})
        Traceback (most recent call last):
        ...
        diffsim.cli._common.CLIError: --task: 'golf' is not one of 'pendulum', 'tennis'
    """
    if value not in registry:
        raise CLIError(f"{option}: {value!r} is not one of {', '.join(repr(n) for n in registry)}")
    return value


def titled_table(title: str) -> Table:
    """A Rich table at least as wide as its title, so the title does not wrap inside a
    number and its unit (``v0 = 8.000 / m/s``) on a terminal wide enough for it."""
    return Table(title=title, min_width=min(len(title), console.width))


err_console = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


class CLIError(ValueError):
    """A rejected command line: reported as one line on stderr, exit code 2."""


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def report_error(message: str) -> None:
    """Print ``error: message`` as one line on stderr."""
    err_console.print(f"[bold red]error:[/] {escape(_one_line(message))}", highlight=False)


_WARNINGS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "diffsim_cli_warnings", default=()
)
"""The warnings of the command running in this context (set afresh by each invocation)."""


def warn(message: str) -> None:
    """A ``warning: message`` line for stderr, printed once when the command succeeds (a
    rejected command prints only its error line)."""
    line = _one_line(message)
    if line not in _WARNINGS.get():
        _WARNINGS.set((*_WARNINGS.get(), line))


def _flush_warnings(caught: Sequence[warnings.WarningMessage]) -> None:
    for w in caught:
        warn(f"{w.category.__name__}: {w.message}")
    for line in _WARNINGS.get():
        err_console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)


def _is_out_of_memory(err: BaseException) -> bool:
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in str(err)


def _blank_flag_types(command: Any) -> None:
    """Flags (``--json``, ``--help``, ...) take no value: show no ``<bool>`` type for them
    in ``--help`` (recent Typer labels every option with its type)."""
    helper = command.get_help_option(click.Context(command))
    for param in [*command.params, *([helper] if helper is not None else [])]:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _blank_flag_types(sub)


class _OneLineErrors(TyperGroup):
    """The app's group: Click's parse errors and the commands' errors as one line, exit 2."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        _WARNINGS.set(())
        _blank_flag_types(self)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                rv = super().main(
                    args=args,
                    prog_name=prog_name,
                    complete_var=complete_var,
                    standalone_mode=False,
                    **extra,
                )
            _flush_warnings(caught)
        except _NO_ARGS_IS_HELP as err:
            err.show()
            sys.exit(2)
        except click.ClickException as err:
            report_error(err.format_message())
            sys.exit(2)
        except typer.Abort:
            report_error("aborted")
            sys.exit(1)
        except MissingExtraError as err:  # `diffsim demo` or `plot` without their extra
            report_error(str(err))
            sys.exit(1)
        except (ValueError, TypeError) as err:
            report_error(str(err))
            sys.exit(2)
        except Exception as err:  # a bug in diffsim (or the machine ran out of memory)
            if _is_out_of_memory(err):
                report_error(f"out of memory: {type(err).__name__}: {err}")
                sys.exit(2)
            report_error(f"internal error (a bug in diffsim, please report it): "
                         f"{type(err).__name__}: {err}")  # fmt: skip
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


INT_OPTION_MAX = 2**63 - 1
"""No integer option takes more than this (int64): a larger one is refused before any command
code formats it (``:.3g`` of a 400-digit int overflows a float) or traces it."""


def count_text(value: int) -> str:
    """An integer as a message shows it: in full up to 20 digits, else its leading digits and
    its length (a 400-digit count is not echoed back)."""
    digits = str(abs(value))
    if len(digits) <= 20:
        return str(value)
    return f"{'-' if value < 0 else ''}{digits[:6]}… ({len(digits)} digits)"


def bound_integers(fn: F) -> F:
    """Refuse, before ``fn`` runs, any integer option beyond ±(2⁶³ − 1) (one line, exit 2).

    Every command registered on :data:`app` gets this (``_App.command``), so no command can
    format, multiply into a float or trace an integer that no option accepts; each command
    then checks its own, narrower range."""
    params = inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, value in kwargs.items():
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and (abs(value) > INT_OPTION_MAX)
            ):
                flag, help_text = _flag_of(params.get(name), name)
                own = f" ({help_text})" if help_text else ""
                raise CLIError(
                    f"{flag} {count_text(value)} is out of range{own}: no integer option "
                    f"takes a magnitude over 2⁶³ − 1 = {INT_OPTION_MAX}"
                )
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _flag_of(param: inspect.Parameter | None, name: str) -> tuple[str, str]:
    """The option's first long flag (``--steps``) and its help text (which states its range),
    from its Typer default; else ``--name`` and no help."""
    info = getattr(param, "default", None)
    help_text = getattr(info, "help", None)
    help_text = _one_line(help_text).rstrip(".") if isinstance(help_text, str) else ""
    for decl in getattr(info, "param_decls", None) or ():
        if isinstance(decl, str) and decl.startswith("--"):
            return decl.split("/")[0], help_text
    return f"--{name.replace('_', '-')}", help_text


class _App(typer.Typer):
    """The Typer app whose commands all refuse out-of-range integers (:func:`bound_integers`)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:  # type: ignore[override]
        register = super().command(*args, **kwargs)

        def decorator(fn: F) -> F:
            register(bound_integers(fn))
            return fn

        return decorator


app = _App(
    name="diffsim",
    help="Differentiable simulation that stays trustworthy through contact.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    cls=_OneLineErrors,
    epilog=(
        "Documentation, offline: diffsim docs (the pages bundled with diffsim; start with "
        "diffsim docs getting-started; every command: diffsim docs cli). In a clone, "
        "bash scripts/docs serve shows the site at http://127.0.0.1:8000/."
    ),
)


def handle_errors(fn: F) -> F:
    """Turn the library's ``ValueError``/``TypeError`` into a one-line message, exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as err:
            report_error(str(err))
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


# --- precision --------------------------------------------------------------------------------


def is_float32() -> bool:
    """The CLI computes in float64 unless ``--float32``: the root callback sets JAX's
    ``jax_enable_x64`` accordingly, the one place the precision is kept."""
    import jax

    return not bool(jax.config.jax_enable_x64)  # pyright: ignore[reportAttributeAccessIssue]


def dtype() -> type[np.floating]:
    """The dtype the library will compute in: float32 with ``--float32``, else float64."""
    return np.float32 if is_float32() else np.float64


def precision_name() -> str:
    return "float32" if is_float32() else "float64"


FLOAT32_STEPS = 2**24 // 1000
"""Above this many steps a float32 rollout's accumulated rounding (up to T·2⁻²⁴ relative)
can exceed 0.1 %: the CLI warns (``warn_float32_steps``)."""


def warn_float32_steps(name: str, steps: int) -> None:
    """Warn once when a float32 rollout of ``steps`` steps may lose what the user asked for."""
    if is_float32() and steps > FLOAT32_STEPS:
        err = steps * 2.0**-24
        warn(
            f"--float32 accumulates {steps} steps ({name}): rounding can reach {err:.2%} of "
            f"the result (T·2⁻²⁴ relative); drop --float32 to compute in float64"
        )


def require_finite(name: str, value: float) -> float:
    """CLI-side check (Typer parses 'nan' and 'inf' as floats)."""
    if not math.isfinite(value):
        raise CLIError(f"{name} must be a finite number, got {value}")
    return value


def used(name: str, value: float) -> float:
    """``value`` as the computation will use it (cast to the CLI's dtype), checked finite.

    A number that overflows to inf or underflows to 0 (or to a subnormal) in that dtype is
    rejected: the computation would not see what the user typed.
    """
    require_finite(name, value)
    dt = dtype()
    with np.errstate(over="ignore", under="ignore"):
        cast = dt(value)
    info = np.finfo(dt)
    if not np.isfinite(cast):
        raise CLIError(
            f"--{name} {value:g} overflows {precision_name()} (largest {float(info.max):.3g})"
        )
    bound = float(info.max) ** 0.25
    if abs(value) > bound:
        raise CLIError(
            f"--{name} {value:g} is too large for {precision_name()}: |{name}| must be <= "
            f"{bound:.3g} (= largest**¼, so that products of up to four inputs stay finite)"
        )
    if value != 0 and abs(float(cast)) < float(info.smallest_normal):
        raise CLIError(
            f"--{name} {value:g} underflows {precision_name()} (smallest normal "
            f"{float(info.smallest_normal):.3g}); use a larger value"
            + ("" if dt is np.float64 else " or drop --float32")
        )
    return float(cast)


def check_time_step(h: float) -> float:
    """``--h`` as used (:func:`used`), a time step in seconds: finite and > 0."""
    h = used("h", h)
    if h <= 0:
        raise CLIError(f"h must be finite and > 0 (seconds), got {h}")
    return h


def check_count(name: str, value: int, lo: int, hi: int, why: str) -> int:
    """``lo <= value <= hi`` for an integer option, else one line naming why ``hi``."""
    if value < lo:
        raise CLIError(f"--{name} must be an integer >= {lo}, got {value}")
    if value > hi:
        raise CLIError(f"--{name} must be an integer <= {hi} ({why}), got {value}")
    return value


SEED_MAX = 2**32 - 1


def check_seed(seed: int) -> int:
    """PRNG seeds are 32-bit unsigned integers (the same key in float32 and float64)."""
    return check_count("seed", seed, 0, SEED_MAX, "a 32-bit PRNG seed")


# --- devices ---------------------------------------------------------------------------------

DEVICES_MAX = 4096
DEVICES_HELP = (
    "Devices to split the samples over (default: every device JAX sees; 1: one device). "
    "On a CPU-only machine, N > 1 creates N host devices sharing its cores."
)


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except ImportError:  # pragma: no cover - a JAX without the private module: assume so
        return True


def use_devices(devices: int | None) -> tuple[Any, int]:
    """``--devices N``: the ``devices=`` to pass to the library and how many it spans.

    On the CPU backend, N host devices are created when JAX has not started yet
    (``jax_num_cpu_devices``; ``XLA_FLAGS`` on older JAX); elsewhere N is checked against
    the devices JAX sees, and the error names the option and the accepted range."""
    import jax

    from ..sharding import device_mesh

    if devices is not None:
        check_count("devices", devices, 1, DEVICES_MAX, "a device count")
        if devices > 1:
            try:
                jax.config.update("jax_num_cpu_devices", devices)
            except RuntimeError:  # the backend has started: device_mesh checks the count
                pass
            except (AttributeError, KeyError, ValueError):  # JAX without the option
                if not _backend_started():
                    flag = f"--xla_force_host_platform_device_count={devices}"
                    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    try:
        mesh = device_mesh(devices)
    except ValueError as err:
        raise CLIError(str(err).replace("devices must", "--devices must", 1)) from None
    return devices, 1 if mesh is None else int(mesh.devices.size)


# --- answers, JSON ----------------------------------------------------------------------------


def require_finite_answer(out: Mapping[str, Any], keys: Sequence[str], inputs: str) -> None:
    """Never print a non-finite number as an answer: one line naming it and the inputs."""
    for key in keys:
        arr = np.asarray(out[key], dtype=float)
        if not np.all(np.isfinite(arr)):
            raise CLIError(
                f"{key} came out non-finite ({arr.ravel()[~np.isfinite(arr.ravel())][0]}) in "
                f"{precision_name()} for {inputs}: the inputs are outside what the simulation "
                f"can represent; use values of ordinary size"
            )


def to_jsonable(obj: Any) -> Any:
    """Arrays -> nested lists of floats; everything else unchanged."""
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "shape"):
        arr = np.asarray(obj)
        if arr.dtype == np.bool_:
            return arr.tolist()
        if np.issubdtype(arr.dtype, np.integer):
            return arr.tolist()
        return arr.astype(float).tolist()
    return obj


NOT_FINITE_NOTE = "not computed for this input (the estimator returned {value})"


def strict_json(obj: Any, note: str = NOT_FINITE_NOTE) -> Any:
    """Non-finite floats -> ``null``, with a ``<key>_note`` beside them saying why (strict
    JSON has no NaN or Infinity)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
                out[f"{k}_note"] = note.format(value=v)
            elif isinstance(v, list) and _has_non_finite(v):
                out[k] = strict_json(v, note)
                out[f"{k}_note"] = "null entries: " + note.format(value="a non-finite number")
            else:
                out[k] = strict_json(v, note)
        return out
    if isinstance(obj, list):
        return [strict_json(v, note) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _has_non_finite(items: list[Any]) -> bool:
    for v in items:
        if isinstance(v, float) and not math.isfinite(v):
            return True
        if isinstance(v, list) and _has_non_finite(v):
            return True
    return False


def print_json(obj: Any) -> None:
    """One line of strict JSON (``allow_nan=False``: a NaN left here is a bug, not output)."""
    sys.stdout.write(json.dumps(strict_json(to_jsonable(obj)), allow_nan=False) + "\n")


# --- files ------------------------------------------------------------------------------------


def check_writable(path: Path, option: str = "--out", suffix: str | None = ".png") -> Path:
    """Check BEFORE the work that ``path`` can be written: its folder exists (none is
    created) and is writable, and the path is not a folder."""
    if str(path) == "" or str(path).endswith(os.sep):
        raise CLIError(f"{option} must be a file path, got {str(path)!r}")
    if suffix is not None and path.suffix.lower() != suffix:
        raise CLIError(f"{option} must be a {suffix} path, got {str(path)!r}")
    parent = path.parent if str(path.parent) else Path(".")
    # every file-system call may raise (a name over 255 bytes: ENAMETOOLONG, a loop of
    # links: ELOOP, a component that is a file: ENOTDIR): all of them inside the try
    try:
        if not parent.is_dir():
            raise CLIError(f"{option} {str(path)!r}: folder {str(parent)!r} does not exist")
        if path.is_dir():
            raise CLIError(f"{option} {str(path)!r} is a folder, expected a file path")
        existed = path.exists()
        # the only reliable test (root, read-only mounts, /proc): open it for writing
        with open(path, "ab"):
            pass
        if not existed:
            path.unlink(missing_ok=True)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise CLIError(f"{option} {_short_path(path)!r} is not writable: {reason}") from None
    return path


def _short_path(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 80 else f"{text[:40]}…{text[-30:]} ({len(text)} characters)"


# --- progress ---------------------------------------------------------------------------------

PROGRESS_AFTER_S = 2.0
"""Work estimated to take longer than this shows a progress bar (on a terminal)."""


@contextlib.contextmanager
def progress_bar(
    label: str, total: int, seconds: float, quiet: bool
) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr for work estimated at ``seconds`` (shown only on a
    terminal, when not ``quiet`` and the estimate exceeds :data:`PROGRESS_AFTER_S`).
    Yields ``advance(completed=None, description=None)``."""
    show = (not quiet) and seconds > PROGRESS_AFTER_S and err_console.is_terminal
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TextColumn(f"(estimated ~{seconds:.0f} s)"),
        console=err_console,
        disable=not show,
        transient=True,
    )
    with progress:
        task = progress.add_task(label, total=total)

        def advance(completed: int | None = None, description: str | None = None) -> None:
            kw: dict[str, Any] = {}
            if description is not None:
                kw["description"] = f"{label}: {description}"
            if completed is None:
                progress.advance(task, 1)
                progress.update(task, **kw)
            else:
                progress.update(task, completed=completed, **kw)

        yield advance
