"""How big a command line may ask the CLI to compute: memory and time, estimated up front.

Every command estimates, before anything is traced or compiled, the bytes its arrays will
take (from their shapes: bytes per step or per sample times the count the options ask for)
and the time it will run (the count times a per-unit cost measured once), and rejects what
exceeds the limits with one line that says what would be needed:

* memory: half of this machine's physical memory (the rest is for the OS, JAX's compiler
  and the other programs); a rejected call names both numbers;
* time: 10 minutes (``DIFFSIM_TIME_LIMIT=<seconds>`` changes it); work estimated at more
  than a few seconds shows a progress bar;
* counts: a ``lax.scan`` counts its steps in int32, so no horizon above 2³¹ − 1.

The per-unit costs below were measured on a 2-core AMD EPYC (the slowest machine the CLI is
run on), in float64 (float32 costs no more), with ``jax.jit(...).lower(...).compile()
.memory_analysis()`` for the bytes (temporaries + outputs at two sizes; the slope) and the
median of warm calls for the time.
"""

from __future__ import annotations

import os
from typing import Any

from ._common import CLIError, count_text, is_float32

SCAN_MAX = 2**31 - 1
"""A ``lax.scan`` counts in int32: horizons above this overflow it."""

MEMORY_FRACTION = 0.5
DEFAULT_TIME_LIMIT_S = 600.0

# --- measured per-unit costs (see the module docstring) ---------------------------------------

JACOBIAN_S_PER_STEP = 2.0e-7
"""``diffsim jacobian``: the three routes together, per step (1.6e-7 s measured at T = 1e5).
Their memory does not grow with T (each route carries its product through the scan)."""
WALL_BYTES_PER_STEP = 160.0
"""``diffsim wall``: reverse-mode residuals of d loss/d v0, per step (131 B measured since
StopDead(toi=True) integrates the rest of the stopping step; 94 B before)."""
WALL_S_PER_STEP = 8.0e-6
"""``diffsim wall``: the four calls (landing x, loss, gradient, clears), per step."""
BOUNCE_S_PER_STEP = 6.0e-8
"""``diffsim bounce``: final state + forward-mode Jacobian per step (memory constant)."""
STUDY_S_PER_LOSS = 3.5e-5
"""``diffsim estimate``/``optimize``: seconds per loss evaluation of the wall study (874
steps at h = 1/240 s), vmapped: ZoBG at N = 4096, 3.2e-5 s a sample."""
STUDY_S_PER_GRAD = 6.0e-5
"""Seconds per gradient evaluation of the wall study, vmapped: FoBG at N = 4096, 5.6e-5 s
a sample (AoBG: 0.36 s at N = 4096, what the two sum to)."""
STUDY_S_PER_CALL = 5.0e-3
"""A call's fixed cost besides its evaluations (exact: 3.9 ms for one gradient)."""
STUDY_BYTES_PER_HELD = 220.0
"""Bytes per evaluation held at once (an estimator's ``Cost.batch``): 176 B a loss sample
and 216 B a gradient sample, the slope of ``memory_analysis()`` between N = 256 and 1024
(measured per estimator: AoBG 272 B per sample for its two, auto 190 B per sample)."""
OPTIMIZE_S_PER_STEP = 3.0e-4
"""``diffsim optimize``: per iteration besides the estimate (Adam, the progress callback);
measured: alpha, N = 8, 30 000 iterations in 12.4 s with start-up."""
OPTIMIZE_BYTES_PER_STEP = 64.0
"""``diffsim optimize``: the history kept per iteration (θ, loss, estimate, σ, counts)."""
DOCTOR_S_PER_SAMPLE_STEP = 3.5e-5
"""``diffsim diagnose``: seconds per sample and rollout step (bounce: 1.85 s at 256 × 240)."""
DOCTOR_BYTES_PER_SAMPLE_STEP = 64.0
"""``diffsim diagnose``: bytes per sample and rollout step (a state and its tangent)."""


def memory_bytes() -> int:
    """This machine's physical memory in bytes."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 * 2**30


def memory_limit() -> float:
    return MEMORY_FRACTION * memory_bytes()


def time_limit() -> float:
    raw = os.environ.get("DIFFSIM_TIME_LIMIT", "")
    try:
        value = float(raw) if raw else DEFAULT_TIME_LIMIT_S
    except ValueError:
        value = DEFAULT_TIME_LIMIT_S
    return value if value > 0 else DEFAULT_TIME_LIMIT_S


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_seconds(s: float) -> str:
    if s >= 3600 * 48:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 60:
        return f"{s / 60:.3g} min"
    return f"{s:.3g} s"


def estimate_cost(est: Any, dim: int) -> tuple[float, float]:
    """Bytes and seconds of one call of estimator ``est`` on the wall study's loss of θ
    with ``dim`` components, from the estimator's declared :class:`~diffsim.estimators.Cost`
    (every estimator declares one: a new one is guarded like the built-in ones)."""
    c = est.cost(dim)
    seconds = (
        STUDY_S_PER_CALL + c.loss_evaluations * STUDY_S_PER_LOSS
        + c.grad_evaluations * STUDY_S_PER_GRAD
    )  # fmt: skip
    return c.batch * STUDY_BYTES_PER_HELD, seconds


def check_cost(what: str, nbytes: float, seconds: float, unit: str = "") -> float:
    """Reject ``what`` (e.g. ``"--samples 100000000"``) if it needs more memory or time than
    the limits; return the estimated seconds (for the progress bar)."""
    scale = 0.5 if is_float32() else 1.0  # float32 arrays take half the bytes
    nbytes *= scale
    limit = memory_limit()
    if nbytes > limit:
        raise CLIError(
            f"{what} needs ~{fmt_bytes(nbytes)} of memory{unit}; this machine has "
            f"{fmt_bytes(memory_bytes())}, limit {fmt_bytes(limit)} (half of it)"
        )
    tlimit = time_limit()
    if seconds > tlimit:
        raise CLIError(
            f"{what} would take ~{fmt_seconds(seconds)}{unit}; limit {fmt_seconds(tlimit)} "
            f"(set DIFFSIM_TIME_LIMIT=<seconds> to allow more)"
        )
    return seconds


def check_horizon(what: str, steps: float) -> int:
    """A number of scan steps (possibly computed as a float from h): <= 2³¹ − 1.

    An integer is compared and shown as an integer: formatting one with ``:.3g`` converts
    it to a float, which overflows past ~1.8e308."""
    if not steps <= SCAN_MAX:  # also catches inf and nan
        shown = count_text(steps) if isinstance(steps, int) else f"{steps:.3g}"
        raise CLIError(
            f"{what} needs {shown} steps; a rollout runs at most {SCAN_MAX} (2³¹ − 1, "
            f"its step counter is int32)"
        )
    return int(steps)
