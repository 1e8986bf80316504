"""Property-based fuzz of the ``diffsim`` command line (issue 12).

For every command, draw option values — huge, tiny, negative, zero, NaN/inf strings,
non-numbers, integers past 2³¹/2⁶³ — and assert exactly one of two outcomes:

* exit 0 with finite, correctly typed output (``--json`` parsed strictly: no NaN/Infinity;
  a ``null`` only with a ``<key>_note`` beside it), or
* exit 2 with exactly one line on stderr (no traceback).

Anything else is a defect. Runs in-process through Typer's ``CliRunner``, with the time
limit lowered to 5 s so that accepted draws stay quick. The tally (cases / clean rejections
/ results / defects) is printed at the end of the module (``pytest -s``).
"""

from __future__ import annotations

import gc
import json
import math
import re
from typing import Any

import jax
import pytest
from _tally import Tally
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli_runner
from diffsim.cli import app

runner = cli_runner()
TALLY = Tally("CLI fuzz")

FLOATS_ODD = [
    "0", "-0", "-1", "1e-308", "5e-324", "1e-50", "1e-39", "1e39", "1e308", "-1e308", "1e400",
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "abc", "", "1e", "0x10", "1,5", "--1",
]  # fmt: skip
INTS_ODD = [
    "0", "-1", "1", "7", str(2**31 - 1), str(2**31), str(2**32), str(2**63), str(-(2**63)),
    "99999999999999999999999", "1.5", "1e3", "abc", "", "nan", "inf",
    str(2**63 - 1), str(-(2**63) - 1), "9" * 400, "-" + "9" * 400, "9" * 5000,  # issue 26, D2
]  # fmt: skip


def floats(*typical: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(list(typical)),
        st.sampled_from(FLOATS_ODD),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
    )


def ints(*typical: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(list(typical)),
        st.sampled_from(INTS_ODD),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.integers(min_value=-(10**400), max_value=10**400).map(str),  # issue 26, D2
    )


SEEDS = ints("0", "1", "42", str(2**32 - 1))

COMMANDS: dict[str, dict[str, st.SearchStrategy[str]]] = {
    "jacobian": {"--steps": ints("1", "2", "10", "1000"), "--h": floats("0.01", "1", "1e-6")},
    "wall": {
        "--v0": floats("8", "11", "4", "14", "100"),
        "--h": floats("0.004166", "0.01", "1e-9", "1e3"),
        "--smoothing": floats("0.5", "0.05", "1e-30"),
    },
    "bounce": {
        "--y0": floats("1", "0.5"),
        "--vy0": floats("-1", "0", "3"),
        "--g": floats("9.81", "0"),
        "--e": floats("0.8", "0", "1", "1.0000001"),
        "--h": floats("0.001", "0.01"),
        "--steps": ints("10", "600", "2000"),
    },
    "estimate": {
        "--v0": floats("8", "9.5", "11", "14", "14.0001"),
        "--estimator": st.sampled_from(["exact", "fd", "zeroth", "first", "alpha", "nope", ""]),
        "--sigma": floats("0.7", "0.1", "1.5", "1.6"),
        "--samples": ints("2", "8", "64", "1000000", "100000000"),
        "--seed": SEEDS,
    },
    "optimize": {
        "--v0": floats("8", "11"),
        "--method": st.sampled_from(["decide", "lbfgs", "adam", "bfgs", ""]),
        "--estimator": st.sampled_from(["exact", "zeroth", "alpha", "x"]),
        "--sigma": floats("0.7", "0.3"),
        "--samples": ints("2", "8"),
        "--steps": ints("3", "5", "1000000"),
        "--lr": floats("0.2", "1e-3", "1e6"),
        "--seed": SEEDS,
    },
    "diagnose": {
        "--system": st.sampled_from(["wall", "bounce", "stiff", "free-particle", "moon"]),
        "--v0": floats("8", "11", "3"),
        "--k": floats("1e5", "1e3"),
        "--steps": ints("0", "8", "64", "7"),
        "--sigma": floats("0.1", "0.5"),
        "--samples": ints("16", "64", "15"),
        "--seed": SEEDS,
    },
}
FLAGS = {"bounce": ["--toi", "--no-toi"], "diagnose": ["--toi", "--no-toi"]}
JSON_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "jacobian": {"steps": int, "h": float, "autodiff": list, "closed_form": list},
    "wall": {"landing_x": float, "loss": float, "grad": float, "clears_wall": bool},
    "bounce": {"y_final": float, "dy_final_dy0": float, "toi": bool},
    "estimate": {"estimate": float, "std_error": float, "evaluations": int},
    "optimize": {"v0_final": float, "loss_final": float, "evaluations": int},
    "diagnose": {"verdict": str, "flags": list},
}
NON_FINITE_VALUE = re.compile(
    r"(=\s*|│\s*|^\s*|\s{2,})-?(nan|inf|infinity)(\s*(│|,|$)|\s+(m|s|m/s)\b)",
    re.IGNORECASE | re.MULTILINE,
)
"""A non-finite number printed as a value (after ``=``, in a table cell, in a column), not
the words NaN and inf in the doctor's prose ("NaN or inf in the perturbed losses")."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _check_json_tree(obj: Any, path: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if v is None and not k.endswith("_note") and f"{k}_note" not in obj:
                # null is allowed only with a note that says why (or where the option
                # itself is optional, e.g. "smoothing")
                assert k in ("smoothing",), f"{path}.{k} is null without a note"
            _check_json_tree(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_json_tree(v, f"{path}[{i}]")
    elif isinstance(obj, float):
        assert math.isfinite(obj), f"{path} = {obj}"


def _outcome(command: str, argv: list[str], json_out: bool) -> str:
    if TALLY["cases"] % 50 == 49:  # thousands of shapes compile in one process: free them
        jax.clear_caches()
        gc.collect()
    res = runner.invoke(app, argv)
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        ok = len(lines) == 1 and "Traceback" not in res.output and res.stdout == ""
        TALLY.add("clean rejections" if ok else "defects")
        assert ok, f"{argv}: exit 2 but stderr {res.stderr!r}, stdout {res.stdout[:200]!r}"
        return "rejected"
    if res.exit_code != 0:
        TALLY.add("defects")
        raise AssertionError(f"{argv}: exit {res.exit_code}\n{res.output[-2000:]}")
    try:
        for line in res.stderr.strip().splitlines():
            assert line.startswith("warning:"), f"stray stderr line {line!r}"
        if json_out:
            data = json.loads(res.stdout, parse_constant=_reject_constant)
            assert isinstance(data, dict)
            _check_json_tree(data)
            for key, typ in JSON_TYPES[command].items():
                assert key in data, f"{key} missing"
                value = data[key]
                if typ is float:
                    typ = (float, int)
                assert isinstance(value, typ) and not (
                    typ is not bool and isinstance(value, bool)
                ), f"{key} = {value!r}"
        else:
            assert res.stdout.strip(), "no output"
            assert not NON_FINITE_VALUE.search(res.stdout), res.stdout
    except (AssertionError, ValueError):
        TALLY.add("defects")
        raise
    TALLY.add("results")
    return "result"


@st.composite
def command_lines(draw: st.DrawFn, command: str) -> tuple[list[str], bool]:
    options = COMMANDS[command]
    chosen = draw(st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4))
    argv = [command]
    for name in chosen:
        argv += [name, draw(options[name])]
    if command in FLAGS and draw(st.booleans()):
        argv.append(draw(st.sampled_from(FLAGS[command])))
    json_out = draw(st.booleans())
    if json_out:
        argv.append("--json")
    if draw(st.booleans()):
        argv.insert(0, "--float32")
    return argv, json_out


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    # accepted draws must stay quick: 5 s of estimated work at most
    monkeypatch.setenv("DIFFSIM_TIME_LIMIT", "5")


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    TALLY.report(request)


COMPILING = {"optimize": (15, 60), "estimate": (20, 150), "diagnose": (20, 150)}
"""Commands whose accepted cases each compile an estimator (3-12 s a case on 2 cores): the
number of cases the ``ci`` and the ``long`` profile draw of each (the other tests: 60 and
500, tests/conftest.py)."""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fuzz_command(command):
    @given(command_lines(command))
    def run(case: tuple[list[str], bool]) -> None:
        argv, json_out = case
        _outcome(command, argv, json_out)

    if command in COMPILING:
        ci, long = COMPILING[command]
        run = settings(max_examples=long if settings.get_current_profile_name() == "long" else ci)(
            run
        )
    run()


@given(
    figure=st.sampled_from(["wall", "bounce", "stiff", "smoothing", "nope", ""]),
    out=st.sampled_from(
        ["missing/dir/x.png", "x.jpg", ".", "/proc/nope.png", "", "a/", "/dev/null/x.png"]
        # issue 26, D3: a file name, a folder name over 255 bytes
        + ["a" * 300 + ".png", "b" * 300 + "/x.png", "c" * 5000 + ".png"]
    ),
)
def test_fuzz_plot_paths(figure, out, tmp_path_factory):
    # valid output paths are covered by the regression tests (a figure takes seconds)
    base = tmp_path_factory.mktemp("plot")
    path = out if out.startswith("/") or out in ("", ".") else str(base / out)
    _outcome("plot", ["plot", figure, "--out", path], False)


@given(
    figure=st.sampled_from(["missing/f.png", "f.txt", "/proc/f.png", "/"]),
    frameworks=st.sampled_from(["", "diffsim", "nope,,", "💥"]),
)
def test_fuzz_bench_is_checked_before_it_runs(figure, frameworks, tmp_path_factory):
    base = tmp_path_factory.mktemp("bench")
    path = figure if figure.startswith("/") else str(base / figure)
    argv = ["bench", "--figure", path, "--frameworks", frameworks, "--quick"]
    res = runner.invoke(app, argv)  # every figure drawn is bad: bench never starts its runs
    ok = res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    TALLY.add("clean rejections" if ok else "defects")
    assert ok, (argv, res.exit_code, res.output)


def test_fuzz_no_arguments_and_unknown_command():
    for argv in (["nope"], ["--nope"], ["jacobian", "extra"]):
        _outcome("jacobian", argv, False)


# --- issue 26: options that do not apply to the mode (D6), --mjcf's cost check (D4) ------------

MJCF = "src/diffsim/engines/scenes/free_flight.xml"
NOT_FOR_MJCF = {
    "--system": st.sampled_from(["wall", "bounce", "stiff"]),
    "--v0": floats("8", "-5"),
    "--k": floats("1e5", "-5"),
    "--toi": st.just(None),
    "--no-toi": st.just(None),
    "--battery": st.just(None),
    "--held-out": st.just(None),
}
NOT_FOR_BATTERY = {
    "--system": st.sampled_from(["wall", "bounce", "moon"]),
    "--v0": floats("8"),
    "--k": floats("1e5"),
    "--steps": ints("8", "64"),
    "--sigma": floats("0.1"),
    "--samples": ints("16", "64"),
    "--mjcf": st.just(MJCF),
    "--body": st.just("ball"),
}
NOT_FOR_SYSTEM = {  # system -> options that are not its settings
    "wall": ["--k", "--steps", "--toi", "--no-toi"],
    "bounce": ["--v0", "--k"],
    "stiff": ["--v0", "--toi", "--no-toi"],
    "pendulum": ["--v0", "--k", "--toi"],
}


def _option(name: str, value: str | None) -> list[str]:
    return [name] if value is None else [name, value]


@st.composite
def modes_with_an_option_that_does_not_apply(draw: st.DrawFn) -> list[str]:
    mode = draw(st.sampled_from(["mjcf", "battery", "held-out", "system", "mjcf-only"]))
    argv = ["diagnose"]
    if mode == "mjcf":
        argv += ["--mjcf", MJCF]
        bad = draw(
            st.lists(st.sampled_from(sorted(NOT_FOR_MJCF)), min_size=1, max_size=3, unique=True)
        )
        for name in bad:
            argv += _option(name, draw(NOT_FOR_MJCF[name]))
    elif mode == "battery":
        argv.append("--battery")
        bad = draw(
            st.lists(st.sampled_from(sorted(NOT_FOR_BATTERY)), min_size=1, max_size=3, unique=True)
        )
        for name in bad:
            argv += _option(name, draw(NOT_FOR_BATTERY[name]))
    elif mode == "held-out":
        argv += ["--held-out", *draw(st.sampled_from([[], ["--system", "bounce"], ["--v0", "9"]]))]
    elif mode == "system":
        system = draw(st.sampled_from(sorted(NOT_FOR_SYSTEM)))
        argv += ["--system", system]
        name = draw(st.sampled_from(NOT_FOR_SYSTEM[system]))
        argv += _option(name, None if "toi" in name else draw(floats("3", "100")))
    else:
        name = draw(st.sampled_from(["--wrt", "--body", "--target"]))
        argv += [name, {"--wrt": "qpos0", "--body": "ball", "--target": "1,2,3"}[name]]
    if draw(st.booleans()):
        argv += ["--seed", draw(SEEDS)]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@given(argv=modes_with_an_option_that_does_not_apply())
def test_fuzz_diagnose_refuses_options_the_mode_ignores(argv):
    # every draw holds an option its mode would ignore: a clean rejection, never a run
    assert _outcome("diagnose", argv, "--json" in argv) == "rejected", argv


@given(steps=ints("1", "100", "5", str(2**31 - 1)), samples=ints("16", "256", "100000000"))
def test_fuzz_diagnose_mjcf_cost_is_checked_before_compiling(steps, samples):
    # with the fuzz's 5 s time limit every --mjcf call is refused before compiling (an MJX
    # compile alone takes tens of seconds): D4 was an XLA out-of-memory after 16-53 s
    pytest.importorskip("mujoco.mjx")
    argv = ["diagnose", "--mjcf", MJCF, "--steps", steps, "--samples", samples, "--json"]
    assert _outcome("diagnose", argv, True) == "rejected", argv
