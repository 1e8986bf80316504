"""The benchmark driver: alternated timing, gradient agreement, memory, the machine floor,
estimator cost and the long-horizon table. Used by ``python -m benchmarks`` and
``diffsim bench``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .task import Case, bytes_per_ball_step, flops_per_ball_step

XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false"
"""Intra-op threading slows this workload on small machines (measured on 2 cores); every
JAX-based row runs with it off (set before JAX starts its backend)."""
WARM_CALLS = 1
"""Untimed calls of the same framework right before each timed one: the timed call then
measures that framework in steady state, not the cold caches and waking threads that the
previous framework (PyTorch especially) left behind."""

DIFFSIM_OPTIONS: dict = {}
"""``diffsim.rollout`` options the diffsim row uses: the defaults. ``unroll=4`` halves the
forward time at N = 65536 but slows the gradient (up to 3x at N = 4096), so it is left off;
see docs/benchmarks.md."""
DIFFSIM_FORWARD_OPTIONS: dict = {"unroll": 4}
"""Options of the forward-mode row (``diffsim.value_and_grad``): forward mode keeps no
residuals, so a longer unrolled loop body costs no memory traffic and saves loop overhead."""

FRAMEWORKS = ("diffsim", "diffsim-fwd", "jax", "compiled-C", "numpy", "warp", "taichi", "torch")
"""The default rows: each framework's fastest variant."""
EXTRA_FRAMEWORKS = ("warp-tape",)
"""Rows run only when asked for (``--frameworks``): slower variants kept for reference."""
CI_LEVEL = 0.95
"""Nominal level of the confidence interval of each median (order statistics)."""


def set_xla_flags() -> str | None:
    """Put :data:`XLA_FLAGS` into the environment unless set; warn if JAX already started.

    Nothing else is set process-wide: an ``OMP_WAIT_POLICY=PASSIVE`` here once slowed the
    PyTorch row 1.4x, and the untimed warm call before each timed one already absorbs what
    the previous framework's spinning threads cost.
    """
    if "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = XLA_FLAGS
    if "jax" in sys.modules:
        try:
            from jax._src import xla_bridge

            if getattr(xla_bridge, "_backends", None):
                return "JAX's backend started before XLA_FLAGS was set; flags not applied"
        except ImportError:  # pragma: no cover
            pass
    return None


def make_impl(name: str, n: int, steps: int):
    """Build one framework's implementation; raises ImportError etc. if it cannot run."""
    if name == "diffsim":
        from ._jax_impls import DiffsimImpl

        return DiffsimImpl(n, steps, **DIFFSIM_OPTIONS)
    if name == "diffsim-fwd":
        from ._jax_impls import DiffsimForwardImpl

        return DiffsimForwardImpl(n, steps, **DIFFSIM_FORWARD_OPTIONS)
    if name == "jax":
        from ._jax_impls import PlainJaxImpl

        return PlainJaxImpl(n, steps)
    if name == "numpy":
        from ._jax_impls import NumpyImpl

        return NumpyImpl(n, steps)
    if name == "compiled-C":
        from ._compiled import CompiledImpl

        return CompiledImpl(n, steps)
    from . import _peers

    cls = {
        "warp": _peers.WarpImpl,
        "warp-tape": _peers.WarpTapeImpl,
        "taichi": _peers.TaichiImpl,
        "torch": _peers.TorchImpl,
    }
    return cls[name](n, steps)


def median_ci(xs: list[float], level: float = CI_LEVEL) -> tuple[float, float, float]:
    """Distribution-free confidence interval of the median: ``(low, high, coverage)``.

    The interval between the k-th smallest and the k-th largest of n samples covers the
    true median with probability ``1 − 2 P(Binomial(n, 1/2) < k)``; k is the largest whose
    coverage is still ≥ ``level`` (k = 1, the full range, when n is too small for that:
    the returned coverage then says how much less it is, e.g. 0.94 for n = 5).

    >>> median_ci([5.0, 1.0, 4.0, 2.0, 3.0])
    (1.0, 5.0, 0.9375)
    """
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci needs at least one sample")

    def coverage(k: int) -> float:
        return 1.0 - 2.0 * sum(math.comb(n, j) for j in range(k)) / 2.0**n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= level:
        k += 1
    return xs[k - 1], xs[n - k], coverage(k)


def summarize(xs: list[float]) -> dict:
    """Median, its confidence interval and the interquartile range of ``xs``."""
    lo, hi, cov = median_ci(xs)
    q25, q75 = (float(q) for q in np.quantile(xs, [0.25, 0.75]))
    return {
        "median": statistics.median(xs),
        "ci": [lo, hi],
        "ci_coverage": cov,
        "iqr": [q25, q75],
        "n": len(xs),
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def first_and_median(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, float]:
    """(the first call, compilation included; the median of ``repeats`` later calls), s."""
    import jax  # here, not at the top: set_xla_flags must run before JAX starts

    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    return first, statistics.median(runs)


def gradient_agreement(g: np.ndarray, ref: np.ndarray) -> dict:
    """Largest relative difference, and how many balls differ by more than 1e-3.

    A ball whose path grazes the ground (y within float32 rounding of 0 at a step end) can
    take the contact in one framework and not in another when one fuses ``y + vy h`` into a
    multiply-add; its gradient then differs by O(1). Those balls are counted separately.
    """
    rel = np.abs(g - ref) / np.maximum(np.abs(ref), 1e-3)
    bad = rel > 1e-3
    agree = rel[~bad]
    return {
        "max_rel_diff": float(rel.max()),
        "balls_differing": int(bad.sum()),
        "max_rel_diff_agreeing": float(agree.max()) if agree.size else 0.0,
    }


def _mem_child(name: str, n: int, steps: int, mode: str) -> dict:
    """In a fresh process: first-call time, then the peak-RSS growth of one more call."""
    set_xla_flags()
    impl = make_impl(name, n, steps)
    fn = impl.forward if mode == "forward" else impl.gradient
    first, _ = _timed(fn)
    rss0 = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to now
            f.write("5")
        peak = _status_kib("VmHWM")
        fn()
        peak = _status_kib("VmHWM") - rss0
    except OSError:
        peak = None
    return {"first_call_s": first, "peak_mib": None if peak is None else peak / 1024}


def _status_kib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1])
    raise OSError(key)


def memory_and_first_call(name: str, n: int, steps: int, mode: str) -> dict:
    """Run :func:`_mem_child` in a subprocess (a fresh process, so compile is included)."""
    cmd = [sys.executable, "-m", "benchmarks", "--mem-child", name, str(n), str(steps), mode]
    env = dict(os.environ)
    env.setdefault("XLA_FLAGS", XLA_FLAGS)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception as err:  # reported, never fatal
        return {"error": f"{type(err).__name__}: {str(err)[:120]}"}


def run_case(
    case: Case,
    frameworks: tuple[str, ...],
    rounds: int,
    log: Callable[[str], None],
    memory: bool = True,
) -> dict:
    """Time forward and forward+gradient of every framework on ``case``, in alternation."""
    impls, errors = {}, {}
    for name in frameworks:
        try:
            impls[name] = make_impl(name, case.n, case.steps)
        except Exception as err:
            errors[name] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}"
            log(f"  {name}: not run — {errors[name]}")
    rows: dict[str, dict] = {
        name: {"framework": name, "threads": getattr(impl, "threads", None)}
        for name, impl in impls.items()
    }
    # first calls (compile / JIT / kernel build) and the gradients
    grads = {}
    for name, impl in impls.items():
        try:
            rows[name]["first_forward_s"], _ = _timed(impl.forward)
            if getattr(impl, "has_gradient", True):
                rows[name]["first_gradient_s"], (_, g) = _timed(impl.gradient)
                grads[name] = np.asarray(g, dtype=np.float32)
        except Exception as err:
            errors[name] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}"
            log(f"  {name}: failed — {errors[name]}")
            rows.pop(name)
    impls = {k: v for k, v in impls.items() if k in rows}
    if "diffsim" in grads:
        for name, g in grads.items():
            rows[name]["gradient_agreement"] = gradient_agreement(g, grads["diffsim"])
    # alternated timing: round r runs A B C ... for forward, then for gradient
    times: dict[str, dict[str, list[float]]] = {k: {"forward": [], "gradient": []} for k in impls}
    # Whoever runs right after PyTorch pays for it on these 2 cores (measured: a 0.1 ms JAX
    # call took 0.7-1.0 ms right after a PyTorch call, whichever JAX program it was). So each
    # timed call follows an untimed call of the same framework, and the order is a fresh
    # seeded permutation each round (a rotation would keep the same neighbours).
    names = list(impls)
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        order = [names[i] for i in rng.permutation(len(names))]
        for mode in ("forward", "gradient"):
            for name in order:
                impl = impls[name]
                if mode == "gradient" and not getattr(impl, "has_gradient", True):
                    continue
                fn = impl.forward if mode == "forward" else impl.gradient
                for _ in range(WARM_CALLS):
                    fn()
                dt, _ = _timed(fn)
                times[name][mode].append(dt)
    for name in impls:
        for mode in ("forward", "gradient"):
            ts = times[name][mode]
            if not ts:
                continue
            st = summarize(ts)
            rows[name][f"{mode}_s"] = st["median"]
            rows[name][f"{mode}_stats_s"] = st
            rows[name][f"{mode}_ball_steps_per_s"] = case.ball_steps / st["median"]
            if "diffsim" in times and times["diffsim"][mode]:
                # per-round ratios: both calls of a round share the machine's load then
                ratios = [t / d for t, d in zip(ts, times["diffsim"][mode])]
                rs = summarize(ratios)
                rows[name][f"{mode}_ratio_to_diffsim"] = rs["median"]
                rows[name][f"{mode}_ratio_stats"] = rs
    if memory:
        for name in impls:
            for mode in ("forward", "gradient"):
                if mode == "gradient" and not getattr(impls[name], "has_gradient", True):
                    continue
                m = memory_and_first_call(name, case.n, case.steps, mode)
                rows[name][f"{mode}_peak_mib"] = m.get("peak_mib")
                rows[name][f"{mode}_first_call_fresh_s"] = m.get("first_call_s")
    return {
        "n": case.n,
        "steps": case.steps,
        "rounds": rounds,
        "ci_level": CI_LEVEL,
        "rows": rows,
        "errors": errors,
    }


def machine_floor() -> dict:
    """This machine's memory bandwidth (NumPy stream copy) and FLOP rate (compiled FMAs)."""
    a = np.ones(1 << 25, np.float32)  # 128 MiB: far beyond the caches
    b = np.empty_like(a)
    best = min(_timed(lambda: np.copyto(b, a))[0] for _ in range(5))
    bandwidth = 2 * a.nbytes / best
    try:
        from ._compiled import flop_rate

        flops = flop_rate()
    except Exception as err:  # no compiler: fall back to a NumPy FMA-ish rate
        x = np.ones(1 << 22, np.float32)
        best = min(_timed(lambda: np.multiply(x, 1.0001, out=x))[0] for _ in range(5))
        flops = x.size / best
        return {"bandwidth_Bps": bandwidth, "flops": flops, "flops_note": f"numpy ({err})"}
    return {"bandwidth_Bps": bandwidth, "flops": flops, "flops_note": "one core, AVX2 FMA"}


def floor_for(case: Case, machine: dict) -> dict:
    """Floor time of forward and gradient: the larger of compute and memory time."""
    fl = flops_per_ball_step()
    by = bytes_per_ball_step(case.n, case.steps)
    out = {}
    for mode in ("forward", "gradient"):
        t_c = fl[mode] * case.ball_steps / machine["flops"]
        t_m = by[mode] * case.ball_steps / machine["bandwidth_Bps"]
        out[mode] = {
            "flops_per_ball_step": fl[mode],
            "bytes_per_ball_step": by[mode],
            "floor_s": max(t_c, t_m),
        }
    return out


def estimator_cost(num_samples: int = 1024, rounds: int = 5) -> dict:
    """AoBG and ZoBG time per estimate on projectile_wall vs one batched forward."""
    try:
        import jax
        import jax.numpy as jnp

        from diffsim.estimators import AlphaOrder, ZerothOrder
        from diffsim.systems import projectile_wall as pw
    except Exception as err:
        return {"error": f"estimators not importable: {type(err).__name__}: {err}"}
    v0 = jnp.float32(9.0)
    key = jax.random.PRNGKey(0)
    samples = v0 + 0.5 * jax.random.normal(key, (num_samples,))
    batched = jax.jit(jax.vmap(pw.loss))
    zo = ZerothOrder(sigma=0.5, num_samples=num_samples)
    ao = AlphaOrder(sigma=0.5, num_samples=num_samples)
    # the same budget of simulations split between its two halves: N/2 FoBG + N/2 ZoBG
    ao_half = AlphaOrder(sigma=0.5, num_samples=num_samples // 2)
    fns = {
        "batched_forward": lambda: jax.block_until_ready(batched(samples)),
        "zobg": lambda: jax.block_until_ready(zo(pw.loss, v0, key)),
        "aobg": lambda: jax.block_until_ready(ao(pw.loss, v0, key)),
        "aobg_half": lambda: jax.block_until_ready(ao_half(pw.loss, v0, key)),
    }
    first = {k: _timed(f)[0] for k, f in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            times[k].append(_timed(f)[0])
    out: dict[str, Any] = {"num_samples": num_samples, "first_call_s": first}
    for k in fns:
        out[f"{k}_s"] = statistics.median(times[k])
    for k in ("zobg", "aobg", "aobg_half"):
        out[f"{k}_multiple"] = statistics.median(
            [t / b for t, b in zip(times[k], times["batched_forward"])]
        )
    return out


def versions() -> dict:
    """Versions of Python, the frameworks and the machine."""
    import importlib.metadata as md

    out = {"python": platform.python_version(), "machine": platform.processor() or "?"}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    out["machine"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    out["cores"] = os.cpu_count()
    # diffsim's distribution is diffsim-jax (PyPI's "diffsim" is another package)
    dists = {"diffsim": "diffsim-jax"}
    for pkg in ("diffsim", "jax", "jaxlib", "numpy", "warp-lang", "taichi", "torch"):
        try:
            out[pkg] = md.version(dists.get(pkg, pkg))
        except md.PackageNotFoundError:
            out[pkg] = None
    return out
