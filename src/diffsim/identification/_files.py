"""Recording files: :func:`save_recording` and :func:`load_recording` (``.npz`` or ``.csv``,
columns named as MuJoCo names the signals)."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._recording import Recording

FILE_SIGNALS = ("qpos", "qvel", "sensordata")
"""Signals a recording file may hold (besides ``time`` and ``ctrl``), MuJoCo's names."""


def save_recording(path: str | os.PathLike, rec: Recording) -> None:
    """Write a recording as ``.npz`` or ``.csv`` (by suffix): columns ``time``, the signals
    (``qpos``, ``qvel``, ``sensordata``: MuJoCo's names) and ``ctrl``, one row per sample
    (T + 1 rows; ``ctrl``'s last row repeats the one before). CSV headers are ``time,
    qpos_0, qpos_1, ..., ctrl_0, ...``; an empty CSV cell or NaN is a missing sample.

    Example:
        >>> import os, tempfile
        >>> from diffsim import Recording, load_recording, save_recording
        >>> rec = Recording((0.0, 1.0), {"qpos": [[0.0], [0.1]], "qvel": [[1.0], [1.0]]},
        ...                 time=[0.0, 0.1])
        >>> path = os.path.join(tempfile.mkdtemp(), "rec.csv")
        >>> save_recording(path, rec)
        >>> load_recording(path).signals["qpos"].ravel().tolist()
        [0.0, 0.1]
    """
    cols = _columns(rec)
    path = os.fspath(path)
    if path.endswith(".npz"):
        np.savez(path, **cols)  # pyright: ignore[reportArgumentType]
    elif path.endswith(".csv"):
        header, data = [], []
        for k, v in cols.items():
            v = np.asarray(v, dtype=float).reshape(v.shape[0], -1)
            header += [k] if k == "time" else [f"{k}_{j}" for j in range(v.shape[1])]
            data.append(v)
        np.savetxt(path, np.hstack(data), delimiter=",", header=",".join(header), comments="")
    else:
        raise ValueError(f"path must end in .npz or .csv, got {path!r}")


def _columns(rec: Recording) -> dict[str, np.ndarray]:
    T = rec.num_steps
    unknown = set(rec.signals) - set(FILE_SIGNALS)
    if unknown:
        raise ValueError(
            f"a recording file holds the signals {', '.join(FILE_SIGNALS)}; this one also has "
            f"{', '.join(sorted(unknown))}"
        )
    t = rec.time if rec.time is not None else np.arange(T + 1, dtype=float)
    cols: dict[str, np.ndarray] = {"time": np.asarray(t, dtype=float)}
    cols.update({k: np.asarray(v, dtype=float) for k, v in rec.signals.items()})
    if rec.inputs is not None:
        u = np.asarray(rec.inputs, dtype=float).reshape(T, -1)
        cols["ctrl"] = np.concatenate([u, u[-1:]])
    return cols


def load_recording(
    path: str | os.PathLike,
    *,
    initial_state: Callable[[Any, Any], Any] | None = None,
    control: Callable[[Any], Any] | None = None,
    signals: Sequence[str] | None = None,
) -> Recording:
    """Read a recording written by :func:`save_recording` (or by hand: ``.npz`` arrays or
    ``.csv`` columns named as there). ``time`` and ``qpos`` are required; the initial state
    is ``initial_state(qpos[0], qvel[0])`` (default the pair ``(qpos[0], qvel[0])``;
    an MJX step's ``step.initial_state``); ``ctrl`` row t drives step t → t+1.

    Args:
        path: a ``.npz`` or ``.csv`` file.
        initial_state: builds the state from the first row's ``qpos`` and ``qvel``.
        control: maps the ``(T, nu)`` controls to the step's inputs (default: as they are;
            ``lambda u: u[:, 0]`` for a step that takes a scalar ``u``).
        signals: the signals to fit (default every one the file has).

    Raises:
        ValueError: a missing file or column, rows that disagree, a non-finite time, an
            initial row with NaN.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from diffsim import load_recording
        >>> path = os.path.join(tempfile.mkdtemp(), "ball.npz")
        >>> np.savez(path, time=[0.0, 0.01], qpos=[[1.0], [0.99]], qvel=[[-1.0], [-1.0]])
        >>> rec = load_recording(path, initial_state=lambda q, v: (q[0], v[0]))
        >>> [float(x) for x in rec.s0], rec.num_steps
        ([1.0, -1.0], 1)
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"recording file {path!r} is a directory, not a .npz or .csv file")
    if not os.path.isfile(path):
        raise ValueError(f"recording file {path!r} not found")
    if path.endswith(".npz"):
        cols = _read_npz(path)
    elif path.endswith(".csv"):
        cols = _read_csv(path)
    else:
        raise ValueError(f"recording file must end in .npz or .csv, got {path!r}")
    for need in ("time", "qpos"):
        if need not in cols:
            raise ValueError(
                f"recording file {path!r} has no {need!r} column; columns: {', '.join(cols)}"
            )
    t = cols["time"]
    if t.ndim != 1 or t.shape[0] < 2 or not np.all(np.isfinite(t)):
        raise ValueError(f"recording file {path!r}: time must be finite with >= 2 rows")
    n = t.shape[0]
    for k, v in cols.items():
        if v.shape[0] != n:
            raise ValueError(f"recording file {path!r}: {k!r} has {v.shape[0]} rows, time {n}")
    unknown = set(cols) - {"time", "ctrl", *FILE_SIGNALS}
    if unknown:
        raise ValueError(
            f"recording file {path!r}: unknown columns {', '.join(sorted(unknown))}; accepted: "
            f"time, ctrl, {', '.join(FILE_SIGNALS)}"
        )
    # a signal with no columns (sensordata of a model without sensors) gives no residual
    present = [k for k in FILE_SIGNALS if k in cols and cols[k].shape[1] > 0]
    chosen = list(signals) if signals is not None else present
    if not chosen:
        shapes = ", ".join(f"{k} {cols[k].shape}" for k in FILE_SIGNALS if k in cols)
        raise ValueError(f"recording file {path!r} has no signal with a column: {shapes}")
    for k in chosen:
        if k not in cols:
            raise ValueError(f"signals names {k!r}, not in {path!r}: {', '.join(present)}")
    q0 = cols["qpos"][0]
    v0 = cols["qvel"][0] if "qvel" in cols else np.zeros_like(q0)
    if not (np.all(np.isfinite(q0)) and np.all(np.isfinite(v0))):
        raise ValueError(f"recording file {path!r}: the first row (the initial state) has NaN")
    build = initial_state or (lambda q, v: (q, v))
    ctrl = cols.get("ctrl")
    return Recording(
        build(q0, v0),
        {k: cols[k] for k in chosen},
        None if ctrl is None else (control or (lambda u: u))(ctrl[:-1]),
        None,
        t,
    )


def _real(path: str, name: str, value: Any) -> np.ndarray:
    """A column as a float array: real numbers only (complex, text and objects refused)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"recording file {path!r}: {name!r} must hold real numbers, got dtype {arr.dtype}"
        )
    return arr.astype(float)


def _read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` recording: time 1-d, every other 1-d (one column) or 2-d."""
    # the file is opened here, not by np.load: when the zip is unreadable np.load raises
    # with its own file handle left open (the long fuzz run's ResourceWarnings)
    with open(path, "rb") as fh:
        try:
            loaded = np.load(fh, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                raw = None
            else:
                with loaded as f:
                    raw = {k: f[k] for k in f.files}
        except Exception as err:  # a truncated or non-zip file: zipfile's and numpy's errors
            raise ValueError(f"recording file {path!r} is not a readable .npz ({err})") from None
    if raw is None:
        raise ValueError(f"recording file {path!r} is a single .npy array, not an .npz")
    if not raw:
        raise ValueError(f"recording file {path!r} holds no arrays (time and qpos needed)")
    cols = {}
    for k, v in raw.items():
        arr = _real(path, k, v)
        if arr.ndim not in (1, 2) or (k == "time" and arr.ndim != 1):
            want = "1-d" if k == "time" else "1-d or 2-d (rows, columns)"
            raise ValueError(
                f"recording file {path!r}: {k!r} must be {want}, got shape {arr.shape}"
            )
        cols[k] = arr[:, None] if arr.ndim == 1 and k != "time" else arr
    return cols


def _read_csv(path: str) -> dict[str, np.ndarray]:
    """The columns of a ``.csv`` recording, grouped by name and ordered by their ``_i``
    index: ``qpos_0, qpos_1, ...`` in any order; a name alone is one column. Duplicate
    names, gaps in the indices and a name both alone and indexed are refused."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError:
        raise ValueError(f"recording file {path!r} is not UTF-8 text (a CSV is needed)") from None
    except csv.Error as err:
        raise ValueError(f"recording file {path!r}: {err} (a CSV of numbers is needed)") from None
    if len(rows) < 3:
        raise ValueError(f"recording file {path!r}: a header and at least two rows needed")
    header = [h.strip().lstrip("# ") for h in rows[0]]
    try:
        data = np.array([[float(c) if c.strip() else np.nan for c in r] for r in rows[1:]])
    except ValueError as err:
        raise ValueError(f"recording file {path!r}: {err}") from None
    if data.ndim != 2 or data.shape[1] != len(header):
        raise ValueError(f"recording file {path!r}: every row needs {len(header)} cells")
    return {name: data[:, idx] if name != "time" else data[:, idx[0]]
            for name, idx in _column_groups(path, header).items()}  # fmt: skip


def _column_groups(path: str, header: list[str]) -> dict[str, list[int]]:
    """Each signal's column numbers, ordered by the ``_i`` suffix of their names."""
    seen: dict[str, int] = {}
    for j, h in enumerate(header):
        if h in seen:
            raise ValueError(f"recording file {path!r}: the column {h!r} appears twice")
        seen[h] = j
    groups: dict[str, dict[int, int]] = {}
    alone: dict[str, int] = {}
    for h, j in seen.items():
        m = re.fullmatch(r"(.+)_(\d+)", h)
        if m and m.group(1) != "time":
            groups.setdefault(m.group(1), {})[int(m.group(2))] = j
        else:
            alone[h] = j
    for name in set(groups) & set(alone):
        raise ValueError(
            f"recording file {path!r}: {name!r} is both a column and indexed columns "
            f"({name}_0, ...); name its columns one way"
        )
    out = {name: [j] for name, j in alone.items()}
    for name, by_index in groups.items():
        want = list(range(len(by_index)))
        if sorted(by_index) != want:
            raise ValueError(
                f"recording file {path!r}: the columns of {name!r} must be numbered "
                f"{name}_0 .. {name}_{len(by_index) - 1} without gaps, got indices "
                f"{sorted(by_index)}"
            )
        out[name] = [by_index[i] for i in want]
    return out
