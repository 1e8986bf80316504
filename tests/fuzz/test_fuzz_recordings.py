"""Property-based fuzzing of recordings and identification (issue 49's three families).

* **Recording files**: a mass-spring recording written as CSV with its columns permuted,
  then possibly corrupted (a column duplicated, dropped, renamed to another naming scheme,
  bytes cut off or replaced); and ``.npz`` files with signals of drawn shapes and dtypes.
  A permutation alone must load to the same recording, bit for bit; anything else loads to
  a finite, consistent recording or is a ``ValueError`` naming the file.
* **Physical settings for ``diffsim record``**: a built-in system, one of its parameters
  set to a drawn value (good, edge, unphysical, non-finite): exit 0 with a file of finite
  samples, or exit 2 with one line on stderr and no file.
* **Starts across 600 orders of magnitude for ``identify``**: the free particle's
  acceleration from a start ±10^e, e in [−300, 300]: the fit from every start ends where
  the fit from 0 ends (to 1e-6 relative) with an interval that holds it, or a
  ``ValueError`` saying the start is too far from the data.

The tally (cases, clean rejections, results, defects) as in tests/fuzz/_tally.py.
"""

from __future__ import annotations

import io
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tally import Tally
from hypothesis import given, settings
from hypothesis import strategies as st

import diffsim
from diffsim.cli import app
from diffsim.systems import SYSTEMS, free_particle, mass_spring

TALLY = Tally("recordings fuzz")


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    jax.config.update("jax_enable_x64", True)
    yield
    TALLY.report(request)


def _outcome(call, names_file: str | None = None, words: tuple[str, ...] = ()) -> object:
    """Run ``call``; a clean ``ValueError``/``TypeError`` (naming ``names_file`` or one of
    ``words``) is counted and returns None; another exception is a defect (re-raised)."""
    try:
        out = call()
    except (ValueError, TypeError) as err:
        msg = str(err)
        if (names_file is not None and names_file in msg) or any(w in msg for w in words):
            TALLY.add("clean rejections")
            return None
        TALLY.defect(f"{type(err).__name__} naming nothing expected: {msg[:200]}")
        raise
    except Exception as err:
        TALLY.defect(f"{type(err).__name__}: {str(err)[:200]}")
        raise
    return out


# --- recording files ----------------------------------------------------------------------

_MS = mass_spring(3, h=0.01)
_DRIVE = 0.3 * jnp.sin(jnp.arange(30) * 0.2)
_REC = diffsim.identification.simulate_recording(_MS.step, _MS.s0, _MS.theta, 30, inputs=_DRIVE)


def _csv_text(tmp_path) -> tuple[list[str], np.ndarray]:
    path = tmp_path / "base.csv"
    diffsim.save_recording(path, _REC)
    text = path.read_text().splitlines()
    header = text[0].split(",")
    rows = np.array([[float(c) for c in line.split(",")] for line in text[1:]])
    return header, rows


def _same(a: diffsim.Recording, b: diffsim.Recording) -> bool:
    if set(a.signals) != set(b.signals):
        return False
    same = all(
        np.array_equal(np.asarray(a.signals[k]), np.asarray(b.signals[k])) for k in a.signals
    )
    return same and np.array_equal(np.asarray(a.time), np.asarray(b.time))


def _finite_and_consistent(rec: diffsim.Recording) -> bool:
    n = len(np.asarray(rec.time))
    for v in rec.signals.values():
        arr = np.asarray(v, dtype=float)
        if arr.shape[0] != n:
            return False
    return bool(np.all(np.isfinite(np.asarray(rec.time, dtype=float))))


CORRUPTIONS = ("none", "duplicate", "drop", "rename", "truncate", "bytes")


@given(data=st.data(), corruption=st.sampled_from(CORRUPTIONS))
def test_fuzz_csv_columns(data, corruption, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("csv")
    header, rows = _csv_text(tmp)
    order = data.draw(st.permutations(range(len(header))))
    header, rows = [header[i] for i in order], rows[:, order]
    text = None
    if corruption == "duplicate":
        j = data.draw(st.integers(0, len(header) - 1))
        header, rows = [*header, header[j]], np.column_stack([rows, rows[:, j]])
    elif corruption == "drop":
        j = data.draw(st.integers(0, len(header) - 1))
        header, rows = header[:j] + header[j + 1 :], np.delete(rows, j, axis=1)
    elif corruption == "rename":
        j = data.draw(st.integers(0, len(header) - 1))
        header = [*header]
        header[j] = data.draw(st.sampled_from(["qpos", "qvel_9", "ctrl_x", "", "Qpos_0", "time"]))
    if text is None:
        lines = [",".join(header)] + [",".join(repr(float(v)) for v in r) for r in rows]
        text = ("\n".join(lines) + "\n").encode()
    if corruption == "truncate":
        text = text[: data.draw(st.integers(0, len(text) - 1))]
    elif corruption == "bytes":
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.binary(min_size=1, max_size=8)) + text[at + 1 :]
    path = tmp / "fuzz.csv"
    path.write_bytes(text)
    rec = _outcome(lambda: diffsim.load_recording(path), names_file=str(path))
    if rec is None:
        return
    if corruption == "none" and not _same(rec, _REC):
        TALLY.defect(f"columns permuted as {order}: a different recording")
        raise AssertionError(f"permuting the columns {order} changed the recording")
    if not _finite_and_consistent(rec):
        TALLY.defect("a recording with non-finite times or ragged signals")
        raise AssertionError("inconsistent recording loaded")
    TALLY.add("results")


# a good file is likely (repeated entries weight the draw): qpos (31, 3), time (31,), float
shapes = st.sampled_from([(31, 3)] * 4 + [(), (0,), (31,), (31, 0), (30, 3), (31, 3, 1), (2, 2)])
times = st.sampled_from([(31,)] * 4 + [(), (30,), (31, 1), (1,)])
dtypes = st.sampled_from(["float64"] * 8 + ["float32", "int64", "complex128", "bool", "U3"])


@given(
    qpos=st.tuples(shapes, dtypes),
    qvel=st.one_of(st.none(), st.tuples(shapes, dtypes)),
    time=st.one_of(*[st.tuples(times, dtypes)] * 4, st.none()),
    fill=st.sampled_from([0.5, 0.5, float("nan"), float("inf"), 1e308]),
    cut=st.one_of(st.none(), st.none(), st.integers(0, 400)),
)
def test_fuzz_npz_files(qpos, qvel, time, fill, cut, tmp_path_factory):
    arrays = {}
    for name, spec in (("qpos", qpos), ("qvel", qvel), ("time", time)):
        if spec is None:
            continue
        shape, dtype = spec
        if dtype == "U3":
            arrays[name] = np.full(shape, "abc")
        elif name == "time":  # increasing times of the drawn shape
            arrays[name] = (0.01 * np.arange(int(np.prod(shape)))).reshape(shape).astype(dtype)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                arrays[name] = np.full(shape, fill).astype(dtype)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    raw = buf.getvalue()
    if cut is not None:
        raw = raw[: min(cut, len(raw) - 1)]
    path = tmp_path_factory.mktemp("npz") / "fuzz.npz"
    path.write_bytes(raw)
    rec = _outcome(lambda: diffsim.load_recording(path), names_file=str(path))
    if rec is None:
        return
    if not _finite_and_consistent(rec):
        TALLY.defect(f"npz {[(k, v.shape, v.dtype) for k, v in arrays.items()]} loaded ragged")
        raise AssertionError("inconsistent recording loaded")
    TALLY.add("results")


def test_fuzz_npz_is_a_zip():
    """The npz strategy writes real zip archives (a cut one is not): the cases exercise
    the loader, not numpy's writer."""
    buf = io.BytesIO()
    np.savez(buf, qpos=np.zeros((3, 1)))
    assert zipfile.is_zipfile(io.BytesIO(buf.getvalue()))


# --- physical settings for `diffsim record` -----------------------------------------------

RECORDABLE = ("bounce", "stiff", "pendulum", "free-particle", "nonlinear-spring",
              "harmonic-oscillator", "mass-spring")  # fmt: skip
VALUES = st.one_of(
    st.floats(-5.0, 5.0, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 1e6, 1e12, 1e300, -1e300, "nan", "inf", "-inf"]),
)


@settings(max_examples=max(10, settings.default.max_examples // 3))
@given(system=st.sampled_from(RECORDABLE), data=st.data(), value=VALUES)
def test_fuzz_record_physical_settings(system, data, value, tmp_path_factory):
    from conftest import cli_runner

    theta = SYSTEMS[system].factory().theta
    name = data.draw(st.sampled_from(sorted(theta)))
    shape = np.shape(theta[name])
    label = name if shape == () else f"{name}[{data.draw(st.integers(0, shape[0] - 1))}]"
    path = tmp_path_factory.mktemp("rec") / "r.npz"
    out = cli_runner().invoke(
        app, ["record", "--system", system, "--set", f"{label}={value}", "--out", str(path),
              "-T", "60"],
    )  # fmt: skip
    if out.exit_code == 2 and out.stderr.count("\n") == 1 and not path.exists():
        TALLY.add("clean rejections")
        return
    if out.exit_code != 0:
        TALLY.defect(f"record {system} {label}={value}: exit {out.exit_code}: {out.output[-200:]}")
        raise AssertionError(out.output)
    with np.load(path) as f:
        finite = all(np.all(np.isfinite(f[k])) for k in f.files)
    if not finite:
        TALLY.defect(f"record {system} {label}={value} wrote non-finite samples")
        raise AssertionError(f"non-finite recording for {label}={value}")
    TALLY.add("results")


# --- identify from starts of every scale --------------------------------------------------

_FP = free_particle(h=0.05)


@pytest.fixture(scope="module")
def particle_fit():
    """A noisy free-particle recording (σ = 1 cm) and the fit from a = 0."""
    pytest.importorskip("optimistix")  # identify's solver (absent on the minimum versions)
    rec = diffsim.identification.simulate_recording(
        _FP.step, _FP.s0, {"a": jnp.asarray(-9.81)}, 40, noise=0.01, key=jax.random.PRNGKey(3)
    )
    ref = diffsim.identify(
        _FP.step, rec, {"a": jnp.asarray(0.0)}, [diffsim.identification.Parameter("a")]
    )
    assert ref.converged and abs(ref.theta["a"] + 9.81) < 0.05
    return rec, ref


@settings(max_examples=max(10, settings.default.max_examples // 3))
@given(exponent=st.floats(-300.0, 300.0), sign=st.sampled_from([1.0, -1.0]))
def test_fuzz_identify_start_scale(particle_fit, exponent, sign):
    rec, ref = particle_fit
    start = sign * 10.0**exponent
    res = _outcome(
        lambda: diffsim.identify(
            _FP.step,
            rec,
            {"a": jnp.asarray(0.0)},
            [diffsim.identification.Parameter("a", start=start)],
        ),
        words=("too far from the data",),
    )
    if res is None:
        return
    a, a_ref = res.theta["a"], ref.theta["a"]
    if not (res.converged and abs(a - a_ref) <= 1e-6 * abs(a_ref)):
        TALLY.defect(f"start {start:.3g}: a = {a!r} (from 0: {a_ref!r}), converged {res.converged}")
        raise AssertionError(f"start {start:.3g} gave a = {a}, from 0 {a_ref}")
    if not (res.interval_low["a"] <= a_ref <= res.interval_high["a"]):
        TALLY.defect(f"start {start:.3g}: interval excludes the fit from 0")
        raise AssertionError("the interval excludes the fit from 0")
    TALLY.add("results")
