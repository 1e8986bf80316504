"""``diffsim record`` and ``diffsim identify``: the shell reproduces the library's fit,
and bad input is one line on stderr with exit code 2."""

from __future__ import annotations

import importlib.util
import json

import jax.numpy as jnp
import pytest

from conftest import cli_runner
from diffsim import identify, load_recording
from diffsim.cli import app
from diffsim.systems import bouncing_ball

runner = cli_runner()


@pytest.mark.slow  # ~15–50 s cold on 2 cores: the default suite stays under 10 min
def test_record_then_identify_bouncing_ball(tmp_path):
    """Noise-free heights of the ball (e = 0.7, g = 9.81, 1.5 s: two bounces) recorded by
    the CLI; the fit from e = 0.6, g = 9.5 recovers them to 1e-6 relative, and equals the
    library's fit on the same file. (Fitting the velocities too from e = 0.5, g = 9 stalls
    at the start: a velocity that jumps at a mistimed bounce makes the cost a staircase.)"""
    path = tmp_path / "ball.csv"
    out = runner.invoke(
        app,
        [
            "record",
            "--system",
            "bounce",
            "--steps",
            "1500",
            "--set",
            "e=0.7",
            "--out",
            str(path),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["signals"] == {"qpos": [1501, 1], "qvel": [1501, 1]}
    args = ["identify", "--system", "bounce", "--data", str(path), "--fit", "e,g"]
    args += ["--bounds", "e=0:1,g=0:inf", "--start", "e=0.6,g=9.5", "--signals", "qpos", "--json"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["verdict"].startswith("identified") and got["unidentifiable"] == []
    assert got["parameters"] == ["e", "g"]
    assert got["theta"] == pytest.approx([0.7, 9.81], rel=1e-6)
    for key in ("interval_low", "interval_high", "residual", "evaluations", "method"):
        assert key in got
    sys = bouncing_ball()
    rec = load_recording(
        path, initial_state=lambda q, v: (jnp.asarray(q[0]), jnp.asarray(v[0])), signals=["qpos"]
    )
    from diffsim.identification import parse_parameters

    params = parse_parameters(
        "e,g", sys.theta, bounds={"e": (0, 1), "g": (0, float("inf"))}, start={"e": 0.6, "g": 9.5}
    )
    res = identify(sys.step, rec, sys.theta, params)
    assert got["theta"] == pytest.approx([res.theta["e"], res.theta["g"]], rel=1e-9)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fit", "k"], "exactly one of --system"),
        (["--system", "nonlinear-spring", "--fit", "spring"], "no field 'spring'"),
        (["--system", "nonlinear-spring", "--fit", "k", "--bounds", "k=5:9"], "strictly inside"),
        (["--system", "nonlinear-spring", "--fit", "k", "--bounds", "k=5"], "LOWER:UPPER"),
        (["--system", "nonlinear-spring", "--fit", "k", "--start", "k=x"], "not a number"),
        (["--system", "nonlinear-spring", "--fit", "k", "--max-steps", "0"], "--max-steps must be"),
        # without the cubic term only k/m and c/m act (at the default c = 0: m and k)
        (
            ["--system", "nonlinear-spring", "--fit", "m,k,c", "--set", "k3=0"],
            "do not determine m, k at",
        ),
        (["--system", "nonlinear-spring", "--fit", "k", "--shooting", "-1"], "--shooting must be"),
        (
            ["--system", "nonlinear-spring", "--fit", "k", "--shooting", "100"],
            "shooting must be fewer steps than the recordings' T = 100",
        ),
        (
            ["--system", "nonlinear-spring", "--fit", "k", "--trust", "maybe"],
            "--trust must be one of act, report, off",
        ),
        (
            ["--system", "nonlinear-spring", "--fit", "k", "--solver", "sparse"],
            "--solver must be one of auto, dense, matrix_free",
        ),
        (["--system", "nonlinear-spring", "--fit", "k", "--intervals-for", " , "], "at least one"),
        (
            [
                "--system",
                "nonlinear-spring",
                "--fit",
                "k",
                "--intervals-for",
                "c",
                "--solver",
                "matrix_free",
            ],
            "intervals_for",
        ),
        (["--system", "pendulum", "--fit", "damping"], "qpos"),  # fine: a 1-D state
    ],
)
def test_identify_bad_input_one_line_exit_2(tmp_path, args, message):
    path = tmp_path / "spring.npz"
    out = runner.invoke(
        app,
        [
            "record",
            "--system",
            "nonlinear-spring",
            "--steps",
            "100",
            "--set",
            "k3=0,c=0.3",
            "--out",
            str(path),
        ],
    )
    assert out.exit_code == 0, out.output
    out = runner.invoke(app, ["identify", "--data", str(path), *args])
    if args[1] == "pendulum":  # the same file fits another (x, v) system: a clean answer
        assert out.exit_code == 0, out.output
        return
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_record_bad_input(tmp_path):
    cases = [
        (
            ["--system", "bounce", "--out", str(tmp_path / "x.txt")],
            "--out must end in .npz or .csv",
        ),
        (
            ["--system", "bounce", "--noise", "-1", "--out", str(tmp_path / "x.npz")],
            "--noise must be",
        ),
        (["--system", "bounce", "--set", "q=1", "--out", str(tmp_path / "x.npz")], "no field 'q'"),
        (["--out", str(tmp_path / "x.npz")], "exactly one of"),
    ]
    for args, message in cases:
        out = runner.invoke(app, ["record", *args])
        assert out.exit_code == 2 and message in out.stderr, out.output
    out = runner.invoke(
        app, ["identify", "--system", "bounce", "--data", str(tmp_path / "none.npz"), "--fit", "e"]
    )
    assert out.exit_code == 2 and "not found" in out.stderr


@pytest.mark.slow
def test_identify_with_multiple_shooting(tmp_path):
    """``--shooting 25`` on 1 s of a damped spring (k = 4, c = 0.3, noise-free x and v):
    4 windows, the truth to 1e-6 relative, and the method says so."""
    path = tmp_path / "spring.npz"
    out = runner.invoke(
        app,
        ["record", "--system", "nonlinear-spring", "--steps", "100", "--set", "k3=0,c=0.3",
         "--out", str(path)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    args = ["identify", "--system", "nonlinear-spring", "--data", str(path), "--fit", "k,c",
            "--set", "k3=0", "--bounds", "k=0:20,c=0:5", "--start", "k=3,c=0.5",
            "--shooting", "25", "--json"]  # fmt: skip
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["windows"] == 4 and "multiple shooting (4 windows)" in got["method"]
    assert got["theta"] == pytest.approx([4.0, 0.3], rel=1e-6), got
    out = runner.invoke(app, args[:-1])  # the table: the cut is said
    assert out.exit_code == 0 and "multiple shooting: 4 windows per recording" in out.stdout


@pytest.mark.slow  # two fits through the CLI, one matrix-free: ~1 min on 2 cores
def test_matrix_free_fit_from_the_cli_matches_the_dense_one(tmp_path):
    """Issue 47: ``--solver matrix_free`` (products by jvp/vjp, steps by CG) gives the dense
    fit's estimates to 1e-8 relative on a 3-mass chain's two stiffnesses (truth 30, 30 from
    20, 25); ``--intervals-for`` computes the named parameter's interval, the same as the
    dense one to 1e-6, and leaves the other's as not computed (null in JSON, said in the
    table)."""
    path = tmp_path / "ms.npz"
    out = runner.invoke(app, ["record", "--system", "mass-spring", "--out", str(path), "-T",
                              "100", "--ctrl", "0.5", "--noise", "1e-4"])  # fmt: skip
    assert out.exit_code == 0, out.output
    args = ["identify", "--system", "mass-spring", "--data", str(path), "--fit", "k[0],k[1]",
            "--start", "k[0]=20,k[1]=25"]  # fmt: skip
    fits = {}
    for solver in ("dense", "matrix_free"):
        extra = ["--intervals-for", "k[0]"] if solver == "matrix_free" else []
        out = runner.invoke(app, [*args, "--solver", solver, *extra, "--json"])
        assert out.exit_code == 0, out.output
        fits[solver] = json.loads(out.stdout)
    dense, free = fits["dense"], fits["matrix_free"]
    assert "matrix-free" in free["method"] and "matrix-free" not in dense["method"]
    assert free["theta"] == pytest.approx(dense["theta"], rel=1e-8)
    assert free["interval_low"][0] == pytest.approx(dense["interval_low"][0], rel=1e-6)
    assert free["interval_high"][0] == pytest.approx(dense["interval_high"][0], rel=1e-6)
    assert free["interval_low"][1] is None and dense["interval_low"][1] is not None
    out = runner.invoke(app, [*args, "--solver", "matrix_free", "--intervals-for", "k[0]"])
    assert out.exit_code == 0 and "not computed" in out.stdout, out.output


@pytest.mark.slow  # ten fits through the CLI: ~1 min on 2 cores
@pytest.mark.parametrize("start", ["1e-300", "1e-5", "0.5", "1e5"])
def test_the_start_scale_does_not_change_the_fit(tmp_path, start):
    """Issue 49: from a = 1e-300 the free particle's fit ended at −8.898 with a 95 % interval
    excluding the truth, "identified". A free parameter now moves in units of at least 1:
    every start gives the fit from a = 0 (to the solver's tolerance, 1e-8 relative)."""
    path = tmp_path / "fp.npz"
    out = runner.invoke(app, ["record", "--system", "free-particle", "--out", str(path),
                              "-T", "40", "--noise", "0.01"])  # fmt: skip
    assert out.exit_code == 0, out.output
    fits = {}
    for s in ("0", start):
        out = runner.invoke(app, ["identify", "--system", "free-particle", "--data", str(path),
                                  "--fit", "a", "--max-steps", "20", "--start", f"a={s}",
                                  "--json"])  # fmt: skip
        assert out.exit_code == 0, out.output
        fits[s] = json.loads(out.stdout)
    ref, got = fits["0"], fits[start]
    assert got["theta"][0] == pytest.approx(ref["theta"][0], rel=1e-8)
    assert got["interval_low"][0] <= ref["theta"][0] <= got["interval_high"][0]
    assert abs(ref["theta"][0] + 9.81) < 0.02  # the recording's truth, σ = 1 cm noise


def test_record_refuses_a_rollout_that_goes_non_finite(tmp_path):
    """Issue 49: a rollout that went NaN wrote rows of NaN and exited 0; identify then read
    every NaN as a missing sample. Now: one line naming the step, exit 2, no file. A spring
    of 1e12 N/m on 1 kg with h = 0.01 s (ω h = 1e4, far past semi-implicit Euler's bound 2)
    grows by ~1e8 a step: inf within 100 steps. No --ctrl: the force at rest (0 N), which
    the shell now feeds a step that takes an input (it told the user about .theta/.s0)."""
    path = tmp_path / "ms.csv"
    out = runner.invoke(app, ["record", "--system", "mass-spring", "--out", str(path), "-T",
                              "100", "--set", "k[0]=1e12"])  # fmt: skip
    assert out.exit_code == 2, out.output
    assert "NaN or inf from step" in out.output and not path.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--system", "mass-spring", "--ctrl", "0.5", "--set", "m[0]=0"],
         "theta['m'][0] = 0 is outside (0, inf), the range of a mass"),
        (["--system", "nonlinear-spring", "--set", "m=-1"],
         "theta['m'] = -1 is outside (0, inf), the range of a mass"),
        (["--system", "bounce", "--set", "e=1.5"],
         "theta['e'] = 1.5 is outside [0, 1], the range of a coefficient of restitution"),
        (["--system", "stiff", "--set", "c=-0.1"],
         "theta['c'] = -0.1 is outside [0, inf), the range of a damping coefficient"),
    ],
)  # fmt: skip
def test_record_refuses_unphysical_settings(tmp_path, args, message):
    """Issue 49: ``--set m=-1`` on the Duffing spring wrote a finite recording of a negative
    mass (its factory refuses m <= 0, --set went around it) and exited 0. Now every --set
    value is checked against the range the system's factory accepts: one line, exit 2, no
    file."""
    path = tmp_path / "x.csv"
    out = runner.invoke(app, ["record", *args, "--out", str(path), "-T", "50"])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert not path.exists()


def test_record_refuses_an_unphysical_mjcf_field(tmp_path):
    """The MJCF counterpart: a negative body mass (MuJoCo's compiler refuses one) is
    refused before the rollout, naming the body's index; a massless cart under a massive
    pole (legal in MuJoCo) is recorded."""
    pytest.importorskip("mujoco")
    from diffsim.engines import scenes

    xml = str(scenes.path("cartpole"))
    path = tmp_path / "cp.npz"
    out = runner.invoke(app, ["record", "--mjcf", xml, "--set", "body_mass:cart=-1",
                              "--out", str(path), "-T", "5"])  # fmt: skip
    assert out.exit_code == 2 and not path.exists(), out.output
    assert "theta['body_mass'][1] = -1 is outside [0, inf)" in out.stderr, out.stderr
    out = runner.invoke(app, ["record", "--mjcf", xml, "--set", "body_mass:cart=0",
                              "--out", str(path), "-T", "5"])  # fmt: skip
    assert out.exit_code == 0 and path.exists(), out.output


def test_identify_json_is_the_same_on_a_second_run_but_for_seconds(tmp_path):
    """Issue 49 item 9: the same fit twice prints the same JSON object, every key but
    'seconds' (the wall time, which --json's help names) equal."""
    path = tmp_path / "fp.npz"
    out = runner.invoke(app, ["record", "--system", "free-particle", "--out", str(path),
                              "-T", "40", "--noise", "0.01"])  # fmt: skip
    assert out.exit_code == 0, out.output
    args = ["identify", "--data", str(path), "--system", "free-particle", "--fit", "a", "--json"]
    first, second = (json.loads(runner.invoke(app, args).stdout) for _ in range(2))
    assert set(first) == set(second) and "seconds" in first
    assert {k: v for k, v in first.items() if k != "seconds"} == {
        k: v for k, v in second.items() if k != "seconds"
    }


def test_identify_bad_input_names_the_argument(tmp_path):
    """Issue 49 item 5's remaining reproducers: bounds wider than float64 ('math domain
    error'), an index that is not an integer ('invalid literal for int()'), a directory as
    --data or --mjcf ('not found'): one line naming the parameter or the file, exit 2."""
    path = tmp_path / "fp.npz"
    assert runner.invoke(app, ["record", "--system", "free-particle", "--out", str(path),
                               "-T", "20"]).exit_code == 0  # fmt: skip
    base = ["identify", "--data", str(path), "--system", "free-particle"]
    cases = [
        ([*base, "--fit", "a", "--bounds", "a=-1e308:1e308"],
         "parameter 'a': bounds (-1e+308, 1e+308) are wider than float64 holds"),
        ([*base, "--fit", "a[ ]"], "parameter 'a[ ]': the index [ ] must be integers"),
        (["identify", "--data", str(tmp_path), "--system", "free-particle", "--fit", "a"],
         "is a directory, not a .npz or .csv file"),
    ]  # fmt: skip
    if importlib.util.find_spec("mujoco") is not None:  # the mjx extra (not on the minimum)
        cases.append((["diagnose", "--mjcf", str(tmp_path)], "is a directory, not an MJCF file"))
    for args, message in cases:
        out = runner.invoke(app, args)
        assert out.exit_code == 2, (args, out.output)
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
