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
    if not os.path.isfile(path):
        raise ValueError(f"recording file {path!r} not found")
    cols: dict[str, np.ndarray] = {}
    if path.endswith(".npz"):
        with np.load(path) as f:
            cols = {k: np.asarray(f[k], dtype=float) for k in f.files}
        cols = {k: (v[:, None] if v.ndim == 1 and k != "time" else v) for k, v in cols.items()}
    elif path.endswith(".csv"):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if len(rows) < 3:
            raise ValueError(f"recording file {path!r}: a header and at least two rows needed")
        header = [h.strip().lstrip("# ") for h in rows[0]]
        try:
            data = np.array([[float(c) if c.strip() else np.nan for c in r] for r in rows[1:]])
        except ValueError as err:
            raise ValueError(f"recording file {path!r}: {err}") from None
        if data.ndim != 2 or data.shape[1] != len(header):
            raise ValueError(f"recording file {path!r}: every row needs {len(header)} cells")
        groups: dict[str, list[int]] = {}
        for j, h in enumerate(header):
            groups.setdefault(re.sub(r"_\d+$", "", h), []).append(j)
        cols = {k: data[:, idx] for k, idx in groups.items()}
        if "time" in cols:
            cols["time"] = cols["time"][:, 0]
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
    present = [k for k in FILE_SIGNALS if k in cols]
    chosen = list(signals) if signals is not None else present
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
