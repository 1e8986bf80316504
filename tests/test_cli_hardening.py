"""Issue 12, the CLI's share: never a silently wrong number (one regression per finding)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from conftest import cli_runner
from diffsim.cli import _limits as limits
from diffsim.cli import app

runner = cli_runner()


def _no_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def strict(text: str):
    return json.loads(text, parse_constant=_no_constant)


def rejected(args: list[str], *words: str) -> str:
    """Exit 2, exactly one line on stderr, no traceback; return that line."""
    res = runner.invoke(app, args)
    assert res.exit_code == 2, (args, res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, (args, res.stderr)
    assert "Traceback" not in res.output
    for w in words:
        assert w in lines[0], (args, lines[0])
    return lines[0]


# --- 1. checked after the cast, never a non-finite answer -----------------------------------


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["wall", "--h", "1e308"], "too large"),
        (["wall", "--h", "1e70"], "steps for the flight"),
        (["wall", "--h", "1"], "steps for the flight"),
        (["estimate", "--sigma", "1e-308"], "sigma"),
        (["jacobian", "--h", "1e308", "--steps", "10"], "too large"),
        (["bounce", "--h", "1e308"], "too large"),
        (["--float32", "wall", "--h", "1e-50"], "underflows float32"),
        (["--float32", "bounce", "--y0", "1e39"], "overflows float32"),
        (["wall", "--v0", "5e-324"], "underflows float64"),
    ],
)
def test_values_checked_as_the_computation_uses_them(args, word):
    rejected(args, word)


def test_a_non_finite_answer_is_an_error_not_output():
    from diffsim.cli._common import CLIError, require_finite_answer

    with pytest.raises(CLIError, match="landing_x came out non-finite"):
        require_finite_answer({"landing_x": float("nan")}, ["landing_x"], "--h 1")
    require_finite_answer({"landing_x": 6.0}, ["landing_x"], "--h 1")


def test_x64_setting_restored_after_a_command():
    before = jax.config.jax_enable_x64  # pyright: ignore[reportAttributeAccessIssue]
    res = runner.invoke(app, ["--float32", "jacobian", "--json"])
    assert res.exit_code == 0, res.output
    assert strict(res.stdout)["dtype"] == "float32"
    assert jax.config.jax_enable_x64 == before  # pyright: ignore[reportAttributeAccessIssue]


# --- 2. precision: float64 by default, a warning where float32 loses ------------------------


def test_jacobian_float64_by_default_is_right_at_1e6_steps():
    res = runner.invoke(app, ["jacobian", "--steps", "1000000", "--json"])
    assert res.exit_code == 0, res.output
    data = strict(res.stdout)
    assert data["dtype"] == "float64"
    assert data["product"][0][1] == pytest.approx(1e6 / 60, rel=1e-9)
    assert res.stderr.strip() == ""  # (older Click/Rich may leave a bare newline)


def test_float32_warns_once_where_it_loses_the_answer():
    res = runner.invoke(app, ["--float32", "jacobian", "--steps", "1000000", "--json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("warning:") == 1 and "drop --float32" in res.stderr
    quiet = runner.invoke(app, ["--float32", "jacobian", "--steps", "100", "--json"])
    assert quiet.exit_code == 0 and quiet.stderr.strip() == ""


# --- 3. size limits from memory and time ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["jacobian", "--steps", str(2**31)], ("2147483647",)),
        (["jacobian", "--steps", "99999999999999999999999"], ("1 to 2³¹ − 1",)),
        (["bounce", "--steps", str(2**31)], ("2147483647",)),
        (["estimate", "--seed", str(2**32)], ("seed",)),
        (["estimate", "--seed", "-1"], ("seed",)),
        (["optimize", "--seed", str(2**40)], ("seed",)),
        (["diagnose", "--seed", str(2**31 * 4)], ("seed",)),
        (["diagnose", "--system", "bounce", "--steps", str(2**31)], ("2147483647",)),
        (["wall", "--h", "2e-9"], ("memory", "this machine has", "limit")),
        (["estimate", "--samples", "100000000"], ("--samples 100000000", "GB of memory")),
        (["optimize", "--steps", "100000000"], ("would take", "limit")),
        (["diagnose", "--samples", "99999999999"], ("memory",)),
    ],
)
def test_limits_reject_with_what_would_be_needed(args, words):
    rejected(args, *words)


def test_time_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("DIFFSIM_TIME_LIMIT", "1")
    rejected(["optimize", "--steps", "100000"], "would take", "DIFFSIM_TIME_LIMIT")


def test_memory_limit_is_half_the_machine():
    assert limits.memory_limit() == pytest.approx(0.5 * limits.memory_bytes())


def test_wall_bytes_per_step_is_an_upper_bound():
    """The constant behind ``wall``'s memory limit bounds what XLA reports for the gradient."""
    from diffsim.systems import projectile_wall as pw

    h = 1 / 2400
    g = jax.jit(jax.grad(lambda v: pw.loss(v, h=h)))  # as `wall` does
    ma = g.lower(jax.numpy.asarray(8.0)).compile().memory_analysis()
    assert ma is not None
    assert ma.temp_size_in_bytes <= limits.WALL_BYTES_PER_STEP * pw.num_steps_for(h)


# --- 5. files and output ----------------------------------------------------------------------


def test_plot_defaults_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["plot", "bounce"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "bounce.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "docs").exists()
    assert str(tmp_path / "bounce.png") in " ".join(res.stdout.split())


def test_plot_creates_no_parent_folders(tmp_path):
    rejected(["plot", "wall", "--out", str(tmp_path / "a" / "b" / "w.png")], "does not exist")
    assert not (tmp_path / "a").exists()


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root")
def test_plot_unwritable_fails_before_the_work(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        rejected(["plot", "wall", "--out", str(ro / "w.png")], "not writable")
    finally:
        ro.chmod(0o700)


def test_plot_unwritable_path_is_one_line():
    rejected(["plot", "wall", "--out", "/proc/diffsim-test.png"], "not writable")


def test_plot_out_must_be_png_file(tmp_path):
    rejected(["plot", "wall", "--out", str(tmp_path / "w.jpg")], ".png")
    rejected(["plot", "wall", "--out", str(tmp_path)], "--out")


def test_bench_figure_checked_before_the_work(tmp_path):
    rejected(["bench", "--figure", str(tmp_path / "no" / "f.png")], "does not exist")


@pytest.mark.parametrize(
    "args",
    [
        ["jacobian", "--json"],
        ["wall", "--json"],
        ["bounce", "--json"],
        ["estimate", "--estimator", "zeroth", "--samples", "8", "--json"],
        ["estimate", "--estimator", "exact", "--json"],
        ["optimize", "--steps", "5", "--json"],
    ],
)
def test_json_is_strict(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    strict(res.stdout)


def test_json_null_with_a_note_instead_of_nan():
    from diffsim.cli._common import strict_json

    out = strict_json({"alpha": float("nan"), "xs": [1.0, float("inf")], "ok": 1.0})
    assert out["alpha"] is None and "alpha_note" in out
    assert out["xs"] == [1.0, None] and "xs_note" in out
    strict(json.dumps(out, allow_nan=False))


# --- every error one line, exit 2 -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["jacobian", "--steps", "abc"],
        ["jacobian", "--h", "x"],
        ["wall", "--bogus"],
        ["plot", "nope"],
        ["diagnose", "--system", "moon"],
        ["estimate", "--v0", "100"],
        ["estimate", "--sigma", "5"],
        ["nosuchcommand"],
    ],
)
def test_every_error_is_one_line_exit_2(args):
    rejected(args)


def test_real_process_one_line_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "diffsim", "wall", "--h", "1e308"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_plot_wrote_path_is_absolute(tmp_path):
    res = runner.invoke(app, ["plot", "stiff", "--out", str(tmp_path / "s.png")])
    assert res.exit_code == 0, res.output
    assert Path(res.stdout.split("wrote", 1)[1].strip().replace("\n", "")).is_absolute()


# --- found by the fuzz test ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["bounce", "--vy0", "1.3407807929942597e+154"], "too large"),  # was OverflowError
        (
            ["--float32", "optimize", "-e", "auto", "--lr", "6062882422785.0"],
            "lr",
        ),  # was OverflowError
        (["optimize", "-m", "adam", "--lr", "15"], "lr"),
    ],
)
def test_fuzz_findings_are_clean_rejections(args, word):
    rejected(args, word)


def test_diagnose_text_never_prints_a_non_finite_value():
    res = runner.invoke(app, ["--float32", "diagnose", "--system", "wall", "--sigma", "3.4e18"])
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 0:
        assert "=nan" not in res.stdout.lower() and "=inf" not in res.stdout.lower()


@pytest.mark.parametrize(
    "args",
    [
        ["bounce", "--h", "1e70", "--steps", "3"],
        ["bounce", "--vy0", "-1e70"],
        ["bounce", "--h", "0.1"],  # t* = 0.361 s: at most 0.0902 s
    ],
)
def test_bounce_step_must_resolve_the_first_impact(args):
    res = cli_runner().invoke(app, args)
    assert res.exit_code == 2
    assert "does not resolve the flight to the first impact" in res.output


def test_bounce_coarse_step_that_resolves_the_impact_still_runs():
    res = cli_runner().invoke(
        app, ["bounce", "--y0", "1", "--vy0", "-1", "--g", "0", "--h", "0.125", "--steps", "16"]
    )
    assert res.exit_code == 0, res.output
    assert "-0.8" in res.output  # ∂y/∂y₀ = −e, the closed form


def test_benchmark_usage_errors_exit_2():
    for args in (["--frameworks", "nope"], ["--sizes", "0"], ["--rounds", "0"]):
        res = subprocess.run(
            [sys.executable, "-m", "benchmarks", *args], capture_output=True, text=True
        )
        assert res.returncode == 2, (args, res.stderr)
        assert "error:" in res.stderr


# --- issue 26 -------------------------------------------------------------------------------

HUGE = "9" * 400


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["bounce", "--steps", HUGE, "--json"], "--steps"),
        (["estimate", "--samples", HUGE], "--samples"),
        (["optimize", "-m", "adam", "--samples", HUGE], "--samples"),
        (["optimize", "--steps", HUGE], "--steps"),
        (["diagnose", "--steps", HUGE], "--steps"),
        (["diagnose", "--samples", HUGE], "--samples"),
        (["diagnose", "--seed", "-" + HUGE], "--seed"),
        (["jacobian", "--steps", HUGE], "--steps"),
        (["estimate", "--devices", str(2**63)], "--devices"),
    ],
)
def test_huge_integers_are_refused_before_they_are_formatted(args, flag):
    # D2: was "internal error: OverflowError: int too large to convert to float" (exit 1)
    line = rejected(args, flag, "is out of range")
    assert line.endswith(f"no integer option takes a magnitude over 2⁶³ − 1 = {2**63 - 1}")
    assert "(400 digits)" in line or str(2**63) in line


def test_huge_integer_error_names_the_options_own_range():
    line = rejected(["jacobian", "--steps", HUGE])
    assert line == (
        "error: --steps 999999… (400 digits) is out of range (Number of steps T (1 to 2³¹ − 1)): "
        f"no integer option takes a magnitude over 2⁶³ − 1 = {2**63 - 1}"
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["bounce", "--steps", str(2**63 - 1)], ("needs 9223372036854775807 steps", "2³¹ − 1")),
        (
            ["estimate", "--samples", str(2**63 - 1)],
            ("--samples must be", "2147483646", "--estimator auto"),
        ),
        (["estimate", "--samples", "100000000"], ("--samples 100000000", "of memory")),
        (["optimize", "--steps", str(2**63 - 1)], ("needs 9223372036854775807 steps",)),
    ],
)
def test_largest_int64_reaches_the_command_checks(args, words):
    rejected(args, *words)


def test_horizon_check_formats_an_integer_as_an_integer():
    with pytest.raises(limits.CLIError, match=r"needs 999999… \(400 digits\) steps"):
        limits.check_horizon("--steps", int(HUGE))
    with pytest.raises(limits.CLIError, match=r"needs 3e\+09 steps"):
        limits.check_horizon("--h", 3e9)


def test_plot_file_name_too_long_is_not_writable(tmp_path):
    # D3: was "internal error: OSError: [Errno 36] File name too long" (exit 1)
    line = rejected(["plot", "wall", "--out", str(tmp_path / ("a" * 300 + ".png"))])
    assert "--out" in line and "is not writable: File name too long" in line
    assert "(" in line and len(line) < 300  # the path is shortened, not echoed in full
    # a folder name too long (the parent check) is the same clean rejection
    rejected(["plot", "wall", "--out", str(tmp_path / ("b" * 300) / "w.png")], "not writable")


FREE_FLIGHT = "src/diffsim/engines/scenes/free_flight.xml"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--steps", "2147483647", "--samples", "16"], ("over 2147483647 steps", "GB of memory")),
        (["--steps", "5", "--samples", "100000000"], ("--samples 100000000", "GB of memory")),
        (["--steps", "2000", "--samples", "256"], ("would take", "limit")),  # 0.3 GB, 15 min
    ],
)
def test_diagnose_mjcf_cost_checked_before_compiling(args, words):
    # D4: was an out-of-memory error from XLA after 16-53 s of compiling
    pytest.importorskip("mujoco.mjx")
    rejected(["diagnose", "--mjcf", FREE_FLIGHT, *args, "--json"], *words, "free_flight.xml")


def test_diagnose_mjcf_memory_estimate_grows_with_the_model():
    pytest.importorskip("mujoco.mjx")
    from diffsim.cli import _diagnose
    from diffsim.engines import mjx

    step = mjx.load(FREE_FLIGHT)
    b1, s1 = _diagnose._mjcf_cost(step, 100, 256)
    b2, s2 = _diagnose._mjcf_cost(step, 200, 256)
    b3, _ = _diagnose._mjcf_cost(step, 100, 512)
    assert 0 < b1 < b2 and b3 == pytest.approx(2 * b1) and s1 < s2
    # the measured cost on free_flight: 540 B a sample-step at T = 2³¹ − 1, 61 kB a sample
    # at T = 5 (issue 26); the estimate is at least that
    assert _diagnose._mjcf_cost(step, 2**31 - 1, 16)[0] >= 16 * (2**31 - 1) * 540
    assert _diagnose._mjcf_cost(step, 5, 10**8)[0] >= 6.1e12


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--mjcf", FREE_FLIGHT, "--system", "stiff", "--k", "-5"],
            "--system, --k do not apply to --mjcf; drop them",
        ),
        (["--battery", "--mjcf", FREE_FLIGHT], "--battery does not apply to --mjcf; drop it"),
        (["--mjcf", FREE_FLIGHT, "--no-toi"], "--toi/--no-toi does not apply to --mjcf"),
        (["--held-out"], "--held-out does not apply to a single system; "),
        (
            ["--system", "bounce", "--v0", "100", "--k", "-5"],
            "--v0, --k do not apply to --system bounce; its settings are --toi/--no-toi, --steps",
        ),
        (["--system", "wall", "--steps", "64"], "--steps does not apply to --system wall"),
        (["--k", "1e3"], "--k does not apply to --system wall; its settings are --v0"),
        (["--system", "stiff", "--toi"], "--toi/--no-toi does not apply to --system stiff"),
        (["--battery", "--samples", "20"], "--samples does not apply to --battery"),
        (["--battery", "--system", "bounce"], "--system does not apply to --battery"),
        (["--body", "ball"], "--body does not apply to the built-in systems"),
        (["--target", "1,2,3", "--wrt", "qpos0"], "--wrt, --target do not apply to the built-in"),
    ],
)
def test_diagnose_refuses_options_the_mode_ignores(args, line):
    # D6: each of these used to run (exit 0) with the option silently ignored
    assert rejected(["diagnose", *args]) == f"error: {line}" or line in rejected(
        ["diagnose", *args]
    )


def test_diagnose_options_that_apply_still_run():
    res = runner.invoke(app, ["diagnose", "--system", "stiff", "--k", "1e3", "--steps", "64"])
    assert res.exit_code == 0, res.output
    assert res.stdout.split()[0] in ("trusted", "untrusted", "inconclusive")


def test_wall_notes_when_the_step_and_the_closed_form_disagree():
    # D19: at v0 = 9.40 (just above the threshold 9.396) the default h is stopped by the wall
    # while the closed form clears it; both were printed with no word about why
    res = runner.invoke(app, ["wall", "--v0", "9.40", "--json"])
    assert res.exit_code == 0, res.output
    out = strict(res.stdout)
    assert out["clears_wall"] is False and out["landing_x"] == 6.0
    assert out["closed_form_landing_x"] == pytest.approx(9.0071, abs=1e-4)
    assert out["note"] == (
        "at h = 0.00416667 s the time-stepped flight is stopped by the wall, while the closed "
        "form (continuous time) clears it: v0 = 9.4 m/s is within the O(h) discretisation "
        "error of the threshold 9.396 m/s; a smaller --h (e.g. 0.000416667) resolves it"
    )
    text = runner.invoke(app, ["wall", "--v0", "9.40"])
    assert text.exit_code == 0 and "note: at h = 0.00416667 s" in " ".join(text.stdout.split())


@pytest.mark.parametrize("args", [["--v0", "9.40", "--h", "1e-4"], ["--v0", "11"], ["--v0", "8"]])
def test_wall_has_no_note_when_they_agree(args):
    res = runner.invoke(app, ["wall", *args, "--json"])
    assert res.exit_code == 0 and "note" not in strict(res.stdout)


def test_wall_horizon_beyond_a_rollout_is_the_library_s_one_line_error():
    """``diffsim wall`` sizes its rollout with ``projectile_wall.num_steps_for`` (no copy of
    the formula in the CLI): T = ⌈1.05 · 2 · 24 sin 45° / 9.81 / h + 2⌉ > 2³¹ − 1 at
    h = 1e-12 is refused with the library's message, exit 2."""
    res = runner.invoke(app, ["wall", "--h", "1e-12"])
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert "\\n" not in line
    assert "needs 3.633e+12 steps to land" in line and "2³¹ − 1" in line
