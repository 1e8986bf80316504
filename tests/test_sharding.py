"""Sharded estimators, doctor, optimisation and batched rollouts (diffsim._sharding).

A JAX process's device count is fixed when JAX starts, so each check runs
tests/sharding_worker.py in a subprocess with ``--xla_force_host_platform_device_count``
CPU devices and compares the numbers it prints:

* one device against four (and three: 30 samples do not divide evenly, the rows are
  padded) for the same key. The draws are identical; XLA compiles a device's share of the
  rows (and the sums over them) into differently vectorised loops, so the estimates agree
  to float32 rounding: within 1e-6 × the per-sample spread (s·√N) — measured 1e-7 — and
  the doctor's verdict, flags and sample count are equal;
* a batched rollout split by ``shard_batch`` (64 balls, 16 per device) is bit-identical;
  ``value_and_grad(batched=True)`` over 30 systems is within 1 ulp;
* two processes (``jax.distributed``, gloo over TCP) with two devices each give the
  single-process four-device estimate.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import jax
import pytest

import diffsim

WORKER = pathlib.Path(__file__).with_name("sharding_worker.py")
ROOT = WORKER.parent.parent
REL = 1e-6  # of the per-sample spread


def _env(devices: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _parse(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def four_devices() -> dict:
    p = subprocess.run(
        [sys.executable, str(WORKER), "single"],
        env=_env(4),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return _parse(p.stdout)


def _close(a: dict, b: dict) -> None:
    for name in a:
        x, y = a[name], b[name]
        tol = REL * y["spread"]
        assert abs(x["estimate"] - y["estimate"]) <= tol, (name, x, y)
        assert abs(x["std_error"] - y["std_error"]) <= tol, (name, x, y)
        assert x["evaluations"] == y["evaluations"], (name, x, y)


@pytest.mark.xdist_group("four_devices")  # one worker starts the subprocess
def test_sharded_estimators_equal_the_one_device_estimates(four_devices):
    r = four_devices
    assert (r["devices"], r["processes"]) == (4, 1)
    assert set(r["one"]) == {"zeroth", "zeroth-antithetic", "first", "alpha", "auto"}
    _close(r["all"], r["one"])  # four devices, 30 samples: padded to 32
    _close(r["three"], r["one"])  # three devices: 10 rows each
    # the estimates are not trivially equal: a cliff within σ, so zeroth- and first-order
    # disagree by far more than the tolerance
    assert abs(r["one"]["zeroth"]["estimate"] - r["one"]["first"]["estimate"]) > 5
    # the compiled program sums the samples where they were evaluated (partial sums, one
    # all-reduce) and never gathers them: no device holds all N
    assert r["hlo_collectives"] == ["all-reduce"], r["hlo_collectives"]


@pytest.mark.xdist_group("four_devices")  # one worker starts the subprocess
def test_sharded_doctor_and_optimize_agree(four_devices):
    d = four_devices["diagnose"]
    assert d["all"]["verdict"] == d["one"]["verdict"] == "untrusted"
    assert d["all"]["flags"] == d["one"]["flags"] and "jump" in d["all"]["flags"]
    assert d["all"]["samples"] == d["one"]["samples"]
    assert abs(d["all"]["smoothed"] - d["one"]["smoothed"]) <= 1e-5 * abs(d["one"]["smoothed"])
    o = four_devices["optimize"]
    assert abs(o["all"]["theta"] - o["one"]["theta"]) <= 1e-5 * abs(o["one"]["theta"])
    assert o["one"]["theta"] > 9.4  # it crossed the cliff: a real optimisation, not a no-op


@pytest.mark.xdist_group("four_devices")  # one worker starts the subprocess
def test_sharded_batched_rollouts_equal_the_one_device_ones(four_devices):
    r = four_devices["rollout"]
    assert r["equal"] and r["max_abs_diff"] == 0.0
    assert r["input_devices"] == 4 and r["output_devices"] == 4
    # diffsim.value_and_grad(batched=True) over 30 systems, 8 per device (padded): XLA
    # vectorises 8 rows differently from 30 (measured: 1 ulp, 3e-7, in some values)
    assert r["vag_max_diff"] <= 1e-6 * r["vag_scale"] and r["vag_devices"] == 4


def test_devices_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"devices must be in \[1, 1\].*device_count"):
        diffsim.sharding.device_mesh(2)
    with pytest.raises(ValueError, match="devices must be >= 1"):
        diffsim.estimators.ZerothOrder(devices=0)
    with pytest.raises(TypeError, match="devices must be"):
        diffsim.estimators.FirstOrder(devices="gpu")
    with pytest.raises(TypeError, match="devices must be"):
        diffsim.estimators.Auto(devices=True)
    assert diffsim.sharding.device_mesh(None) is None and diffsim.sharding.device_mesh(1) is None
    devs = jax.devices()
    mesh = diffsim.sharding.device_mesh(devs)
    assert mesh is not None and mesh.devices.size == 1
    x = jax.numpy.arange(3.0)
    assert diffsim.sharding.shard_batch(x) is x  # one device: unchanged


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.xdist_group("four_devices")  # one worker starts the subprocess
def test_two_processes_give_the_single_process_estimate(four_devices):
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "multi"],
            env=_env(
                2,
                JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                JAX_NUM_PROCESSES="2",
                JAX_PROCESS_ID=str(i),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=600)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, stderr[-4000:]
        outs.append(_parse(stdout))
    assert sorted(o["process"] for o in outs) == [0, 1]
    for o in outs:
        assert (o["processes"], o["devices"], o["local_devices"]) == (2, 4, 2)
        _close(o["all"], four_devices["one"])
        _close(o["all"], four_devices["all"])
    assert outs[0]["all"] == outs[1]["all"]  # every process holds the same result


def _cli_json(*args: str, devices: int) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "diffsim", *args, "--json"],
        env=_env(1),  # the CLI creates the host devices itself (--devices)
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return _parse(p.stdout)


def test_cli_devices_splits_estimate_optimize_and_diagnose():
    for cmd in (
        ("estimate", "-e", "alpha", "--v0", "9.3", "--samples", "30"),
        ("optimize", "-e", "zeroth", "--steps", "5", "--samples", "16"),
        ("diagnose", "--v0", "9.3", "--samples", "32"),
    ):
        one = _cli_json(*cmd, "--devices", "1", devices=1)
        two = _cli_json(*cmd, "--devices", "2", devices=2)
        assert (one["devices"], two["devices"]) == (1, 2), cmd
        if cmd[0] == "estimate":  # float64 here: agreement to rounding of a 30-term mean
            assert abs(one["estimate"] - two["estimate"]) <= 1e-12 * abs(one["estimate"])
        elif cmd[0] == "optimize":
            assert abs(one["v0_final"] - two["v0_final"]) <= 1e-9 * abs(one["v0_final"])
        else:
            assert (one["verdict"], one["flags"]) == (two["verdict"], two["flags"])


def test_cli_devices_beyond_the_started_backend_is_a_clear_error():
    from conftest import cli_runner
    from diffsim.cli import app

    jax.devices()  # this process's backend has started with one device
    r = cli_runner().invoke(app, ["estimate", "--devices", "3", "--json"])
    assert r.exit_code == 2
    assert "--devices must be in [1, 1]" in r.output
    r = cli_runner().invoke(app, ["estimate", "--devices", "0"])
    assert r.exit_code == 2 and "--devices must be an integer >= 1" in r.output
    r = cli_runner().invoke(app, ["estimate", "--devices", "1", "--samples", "8", "--json"])
    assert r.exit_code == 0 and json.loads(r.output.strip().splitlines()[-1])["devices"] == 1


@pytest.mark.slow
def test_cli_bench_devices_runs_the_scaling_benchmark_on_1_and_n_devices():
    p = subprocess.run(
        [sys.executable, "-m", "diffsim", "bench", "--devices", "2", "--quick", "--json"],
        env=_env(1),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout)
    assert out["settings"]["devices"] == [1, 2]
    assert [c["devices"] for c in out["children"]] == [1, 2]
    assert out["versions"]["diffsim"] == diffsim.__version__
