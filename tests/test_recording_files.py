"""Recording files read by name, never by position (issue 49): a CSV's columns in any order
give the same recording; duplicates, gaps and mixed naming are refused; broken ``.npz``
files are a ValueError naming the file, never an internal error."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from diffsim import load_recording

T = np.linspace(0.0, 0.1, 11)
Q = np.stack([np.sin(T), np.cos(T), T**2], axis=1)
V = np.gradient(Q, T, axis=0)


def _csv(path, header, columns):
    np.savetxt(path, np.stack(columns, axis=1), delimiter=",", header=",".join(header),
               comments="")  # fmt: skip
    return str(path)


def _cols(order):
    named = {"time": T, **{f"qpos_{i}": Q[:, i] for i in range(3)},
             **{f"qvel_{i}": V[:, i] for i in range(3)}}  # fmt: skip
    return [h for h in order], [named[h] for h in order]


@pytest.mark.parametrize("seed", range(6))
def test_csv_columns_in_any_order_give_the_same_recording(tmp_path, seed):
    names = ["time"] + [f"qpos_{i}" for i in range(3)] + [f"qvel_{i}" for i in range(3)]
    order = list(np.random.default_rng(seed).permutation(names))
    rec = load_recording(_csv(tmp_path / "r.csv", *_cols(order)))
    np.testing.assert_array_equal(np.asarray(rec.signals["qpos"]), Q)
    np.testing.assert_array_equal(np.asarray(rec.signals["qvel"]), V)
    np.testing.assert_array_equal(np.asarray(rec.s0[0]), Q[0])


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (["time", "qpos_0", "qpos_0"], "appears twice"),
        (["time", "qpos_0", "qpos_5"], "without gaps"),
        (["time", "qpos", "qpos_0"], "both a column and indexed"),
    ],
    ids=["duplicate", "gap", "mixed"],
)
def test_csv_header_defects_are_refused(tmp_path, header, match):
    path = _csv(tmp_path / "r.csv", header, [T, Q[:, 0], Q[:, 1]])
    with pytest.raises(ValueError, match=match) as err:
        load_recording(path)
    assert "r.csv" in str(err.value)


def test_csv_binary_and_huge_cells_name_the_file(tmp_path):
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00time,qpos_0\n\x80\x81,\x82\n1,2\n")
    with pytest.raises(ValueError, match=r"b\.csv.*UTF-8"):
        load_recording(binary)
    huge = tmp_path / "h.csv"
    huge.write_text("time,qpos_0\n" + "1" * 200_000 + ",1\n0,1\n1,2\n")
    with pytest.raises(ValueError, match=r"h\.csv"):
        load_recording(huge)


def test_npz_defects_are_value_errors_naming_the_file(tmp_path):
    zero_d = tmp_path / "z.npz"
    np.savez(zero_d, time=T, qpos=np.asarray(1.0))
    with pytest.raises(ValueError, match=r"z\.npz.*'qpos' must be 1-d or 2-d"):
        load_recording(zero_d)
    truncated = tmp_path / "t.npz"
    np.savez(truncated, time=T, qpos=Q)
    truncated.write_bytes(truncated.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"t\.npz.*not a readable \.npz"):
        load_recording(truncated)
    npy = tmp_path / "a.npz"
    with open(npy, "wb") as f:
        np.save(f, Q)
    with pytest.raises(ValueError, match=r"a\.npz.*single \.npy"):
        load_recording(npy)
    empty = tmp_path / "e.npz"
    with zipfile.ZipFile(empty, "w"):
        pass
    with pytest.raises(ValueError, match=r"e\.npz.*no arrays"):
        load_recording(empty)
    complex_ = tmp_path / "c.npz"
    np.savez(complex_, time=T, qpos=Q + 1j)
    with pytest.raises(ValueError, match=r"c\.npz.*real numbers"):
        load_recording(complex_)


def test_an_empty_signal_gives_no_residual(tmp_path):
    path = tmp_path / "s.npz"
    np.savez(path, time=T, qpos=Q, qvel=V, sensordata=np.zeros((T.size, 0)))
    rec = load_recording(path)
    assert set(rec.signals) == {"qpos", "qvel"}
    # the long fuzz run's find: no signal with a column at all, named with the file
    bare = tmp_path / "bare.npz"
    np.savez(bare, time=T, qpos=np.zeros((T.size, 0)))
    with pytest.raises(ValueError, match=r"bare\.npz' has no signal with a column: qpos"):
        load_recording(bare)
