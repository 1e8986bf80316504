"""``python -m benchmarks.gpu``: throughput of N bouncing balls on an accelerator, one command.

    python -m benchmarks.gpu [--sizes 1e5,1e6,1e7] [--steps 1000] [--rounds 5]
                             [--bandwidth GBps] [--copy-mib 1024] [--json]

Runs on whatever JAX's default backend is (a CUDA GPU when ``jax[cuda]`` is installed; the
CPU otherwise, where it serves as a smoke test with small ``--sizes``). For each N it times
the benchmark task (:mod:`benchmarks.task`) through the public API, as the ``diffsim`` row of
:mod:`benchmarks._jax_impls` writes it — ``jax.vmap`` over ``diffsim.rollout`` of
``WithContact(SemiImplicitEuler, Restitution)``:

* ``vmap``: forward ``jax.jit(sum ∘ vmap(one))`` and gradient ``jax.jit(jax.value_and_grad(…))``
  (reverse mode) on the default device;
* ``fwd-mode``: the gradient by ``diffsim.value_and_grad(one, vy0, …, batched=True,
  mode="forward")`` (no stored residuals: O(1) memory in T, what fits for N = 10⁷);
* ``sharded``: the ``vmap`` programs over ``diffsim.sharding.shard_batch(batch, devices=local
  devices)`` when the process sees several devices (computation follows data).

It reports the median time per call (95 % interval), ball-steps per second, and how close
that comes to the device's memory bandwidth, two ways:

* **floor**: :func:`benchmarks.task.bytes_per_ball_step` — the traffic no implementation can
  avoid (initial and final state, one contact bit per ball-step for the gradient): a few
  bytes per ball-step, so its fraction of the bandwidth is tiny; the task is bound by its
  serial per-ball chain of steps and by the loop, not by that floor;
* **loop model**: the bytes XLA's cost analysis counts for one step of the ``vmap``-ed step
  function (forward), plus one ``vmap``-ed VJP step (reverse-mode gradient), or one
  ``vmap``-ed JVP step (forward-mode gradient), per ball — what the loop
  moves if every iteration reads and writes its carry through device memory, as XLA's while
  loops on GPU do (one or a few kernels per iteration). The achieved effective bandwidth is
  those bytes × N·T ÷ time; on a CPU, where the carry stays in cache, it is an upper count
  (fractions above 1 there are cache, not memory, traffic). For ``sharded`` the bandwidth
  is that of all its devices together.

The reference bandwidth is ``--bandwidth`` if given, else the datasheet peak of the device
kind (:data:`DATASHEET_GBPS`), else the measured one; the measured one (a jitted ``x + 1``
over ``--copy-mib`` MiB: bytes read + written ÷ time, best of 5) is always reported too.

Before running a configuration it compiles it and compares XLA's planned memory
(temp + arguments + outputs) with the device's limit; a configuration that cannot fit (the
reverse-mode gradient of 10⁷ balls × 1000 steps stores ~10 GB of residuals) is reported as
skipped, and an out-of-memory error at run time as failed — never a crash.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import _harness as H
from ._report import fmt_sig, fmt_time
from .task import Case, bytes_per_ball_step, initial_state

DATASHEET_GBPS = (
    ("GH200", 4000.0),
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("H800", 3350.0),
    ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),
    ("A800", 2039.0),
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("A10", 600.0),
    ("V100", 900.0),
    ("T4", 320.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
    ("RTX A6000", 768.0),
)
"""Datasheet peak memory bandwidth (GB/s) by a substring of ``jax.Device.device_kind``,
first match wins (so the longer names come first)."""

CHECK_BALLS = 3
"""Gradients of this many balls (first, middle, last) are reported for checking."""


def datasheet_gbps(kind: str) -> float | None:
    """The datasheet bandwidth of a device kind, or ``None``.

    >>> datasheet_gbps("NVIDIA H100 80GB HBM3"), datasheet_gbps("NVIDIA L4"), datasheet_gbps("cpu")
    (3350.0, 300.0, None)
    """
    for name, gbps in DATASHEET_GBPS:
        if name.lower() in kind.lower():
            return gbps
    return None


def measure_bandwidth(mib: int, device=None) -> float:
    """Bytes read + written per second by a jitted ``x + 1`` over ``mib`` MiB (best of 5)."""
    import jax
    import jax.numpy as jnp

    x = jax.device_put(jnp.ones((mib * 2**20) // 4, jnp.float32), device)
    f = jax.jit(lambda a: a + 1)
    jax.block_until_ready(f(x))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t0)
    del x
    return 2 * (mib * 2**20) / best


def loop_model_bytes() -> dict[str, float]:
    """Bytes per ball-step XLA's cost analysis counts for one vmapped step (and VJP step)."""
    import jax
    import jax.numpy as jnp

    from ._jax_impls import THETA, ball_step

    step = ball_step()
    theta = {k: jnp.asarray(v) for k, v in THETA.items()}
    n = 4096
    s = (jnp.ones((n, 2), jnp.float32), jnp.ones((n, 2), jnp.float32))

    def fwd(s):
        return jax.vmap(lambda si: step(si, theta))(s)

    def bwd(s, ct):
        return jax.vmap(lambda si, ci: jax.vjp(lambda z: step(z, theta), si)[1](ci)[0])(s, ct)

    def cost(f, *args) -> float:
        c = jax.jit(f).lower(*args).compile().cost_analysis()
        if isinstance(c, list):  # older JAX: one dict per program
            c = c[0]
        return float(c.get("bytes accessed", float("nan"))) / n

    def tangent(s, ds):
        return jax.vmap(lambda si, di: jax.jvp(lambda z: step(z, theta), (si,), (di,)))(s, ds)

    f = cost(fwd, s)
    return {
        "forward": f,
        "gradient": f + cost(bwd, s, s),
        "gradient_forward_mode": cost(tangent, s, s),
    }


def _programs(n: int, steps: int, sharded: bool):
    """The jitted forward and gradient of the diffsim row, and their arguments."""
    import jax
    import jax.numpy as jnp

    import diffsim

    from ._jax_impls import ball_loss, ball_step

    one = ball_loss(ball_step(), steps)

    def loss(vy0, x0, y0, vx0):
        return jnp.sum(jax.vmap(one)(vy0, x0, y0, vx0))

    x0, y0, vx0, vy0 = initial_state(n)
    args = tuple(jnp.asarray(a) for a in (vy0, x0, y0, vx0))
    if sharded:
        args = diffsim.sharding.shard_batch(args, devices=jax.local_devices())
    return one, jax.jit(loss), jax.jit(jax.value_and_grad(loss)), args


def _planned_bytes(fn, args) -> int | None:
    try:
        m = fn.lower(*args).compile().memory_analysis()
        return int(m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes)
    except Exception:
        return None


def _device_limit() -> int | None:
    import jax

    try:
        stats = jax.local_devices()[0].memory_stats() or {}
    except Exception:
        return None
    return stats.get("bytes_limit")


def _time(call, rounds: int) -> dict:
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t0)
    return H.summarize(ts)


def run_size(n: int, steps: int, rounds: int, rows: tuple[str, ...], log) -> dict:
    """Every row's forward and gradient timings for ``n`` balls, with the checked gradients."""
    import jax
    import numpy as np

    import diffsim

    limit = _device_limit()
    idx = sorted({0, n // 2, n - 1})[:CHECK_BALLS]
    out: dict = {"n": n, "steps": steps, "ball_steps": n * steps, "check_balls": idx, "rows": {}}
    ndev = jax.local_device_count()
    for row in rows:
        res: dict = {}
        out["rows"][row] = res
        if row == "sharded" and (ndev < 2 or n % ndev):
            res["skipped"] = (
                f"needs several devices (sees {ndev})" if ndev < 2 else f"N % {ndev} != 0"
            )
            continue
        try:
            one, fwd, grad, args = _programs(n, steps, sharded=row == "sharded")
            if row == "fwd-mode":
                vy0, *rest = args

                def grad_call(one=one, vy0=vy0, rest=rest):
                    r = diffsim.value_and_grad(one, vy0, *rest, batched=True, mode="forward")
                    return jax.block_until_ready((r.value, r.grad))

                modes = {"gradient": grad_call}
                planned = {}
            else:

                def fwd_call(fwd=fwd, args=args):
                    return jax.block_until_ready(fwd(*args))

                def grad_call(grad=grad, args=args):
                    return jax.block_until_ready(grad(*args))

                modes = {"forward": fwd_call, "gradient": grad_call}
                planned = {
                    "forward": _planned_bytes(fwd, args),
                    "gradient": _planned_bytes(grad, args),
                }
            for mode, call in modes.items():
                p = planned.get(mode)
                res[f"{mode}_planned_bytes_per_device"] = p
                if p is not None and limit and p > 0.95 * limit:
                    res[f"{mode}_skipped"] = (
                        f"needs {p / 2**30:.3g} GiB per device, the device has {limit / 2**30:.3g}"
                    )
                    continue
                try:
                    t0 = time.perf_counter()
                    got = call()
                    res[f"{mode}_first_call_s"] = time.perf_counter() - t0
                    res[f"{mode}_time_s"] = _time(call, rounds)
                    res[f"{mode}_ball_steps_per_s"] = n * steps / res[f"{mode}_time_s"]["median"]
                    if mode == "gradient":
                        _, g = got
                        res["check_grad"] = [float(v) for v in np.asarray(g)[idx]]
                        res["grad_finite"] = bool(np.all(np.isfinite(np.asarray(g))))
                    else:
                        res["forward_value"] = float(got)
                except Exception as err:  # out of memory and the like: reported
                    res[f"{mode}_error"] = f"{type(err).__name__}: {str(err)[:300]}"
                    log(f"  {row} {mode}: failed — {res[f'{mode}_error'][:200]}")
            del args
        except Exception as err:
            res["error"] = f"{type(err).__name__}: {str(err)[:300]}"
            log(f"  {row}: failed — {res['error'][:200]}")
    return out


def add_bandwidth(size: dict, model: dict, bw: float, ndev: int) -> None:
    """Floor and loop-model fractions of the reference bandwidth ``bw`` (in place)."""
    floor = bytes_per_ball_step(size["n"], size["steps"])
    for row, res in size["rows"].items():
        devices = ndev if row == "sharded" else 1
        for mode in ("forward", "gradient"):
            rate = res.get(f"{mode}_ball_steps_per_s")
            if rate is None:
                continue
            moved = model["gradient_forward_mode" if row == "fwd-mode" else mode]
            res[f"{mode}_floor_bytes_per_ball_step"] = floor[mode]
            res[f"{mode}_floor_fraction"] = floor[mode] * rate / (bw * devices)
            res[f"{mode}_model_bytes_per_ball_step"] = moved
            res[f"{mode}_effective_Bps"] = moved * rate
            res[f"{mode}_model_fraction"] = moved * rate / (bw * devices)


def _parse_sizes(text: str) -> list[int]:
    sizes = [int(float(v)) for v in text.split(",") if v.strip()]
    if not sizes or min(sizes) < 1:
        raise ValueError(text)
    return sizes


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    p.add_argument("--sizes", default="1e5,1e6,1e7", help="comma-separated N (1e5 notation ok)")
    p.add_argument("--steps", type=int, default=1000, help="T steps")
    p.add_argument("--rounds", type=int, default=5, help="timed calls per configuration")
    p.add_argument("--rows", default="vmap,fwd-mode,sharded")
    p.add_argument("--bandwidth", type=float, default=None, help="reference bandwidth, GB/s")
    p.add_argument(
        "--copy-mib", type=int, default=None, help="bandwidth copy size (GPU 1024, CPU 64)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    try:
        sizes = _parse_sizes(args.sizes)
    except ValueError:
        p.error(f"--sizes must be comma-separated integers >= 1, got {args.sizes!r}")
    if min(args.steps, args.rounds) < 1:
        p.error("--steps and --rounds must be >= 1")
    rows = tuple(r for r in args.rows.split(",") if r)
    if set(rows) - {"vmap", "fwd-mode", "sharded"}:
        p.error("--rows: choose from vmap,fwd-mode,sharded")
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    import jax  # XLA's defaults: the harness's CPU threading flag is for the CPU tables

    dev = jax.devices()[0]
    kind, platform = dev.device_kind, dev.platform
    ndev = jax.local_device_count()
    copy_mib = args.copy_mib or (1024 if platform != "cpu" else 64)
    measured = measure_bandwidth(copy_mib, dev)
    sheet = datasheet_gbps(kind) if platform != "cpu" else None
    if args.bandwidth:
        bw, source = args.bandwidth * 1e9, "--bandwidth"
    elif sheet:
        bw, source = sheet * 1e9, "datasheet"
    else:
        bw, source = measured, "measured"
    sheet_text = f"{sheet:g} GB/s" if sheet else "unknown"
    log(
        f"device: {kind} ({platform}) x {ndev} local; bandwidth measured {measured / 1e9:.3g} GB/s "
        f"(x + 1 over {copy_mib} MiB), datasheet "
        f"{sheet_text}; reference: {bw / 1e9:.3g} GB/s ({source})"
    )
    model = loop_model_bytes()
    out: dict = {
        "command": "python -m benchmarks.gpu "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "versions": H.versions(),
        "device_kind": kind,
        "platform": platform,
        "local_devices": ndev,
        "bandwidth": {
            "measured_Bps": measured,
            "copy_mib": copy_mib,
            "datasheet_Bps": sheet * 1e9 if sheet else None,
            "reference_Bps": bw,
            "reference_source": source,
        },
        "loop_model_bytes_per_ball_step": model,
        "floor_bytes_per_ball_step_T": bytes_per_ball_step(1, args.steps),
        "sizes": [],
    }
    for n in sizes:
        log(
            f"== N = {n} balls, T = {args.steps} steps "
            f"({Case(n, args.steps).ball_steps:.3g} ball-steps)"
        )
        size = run_size(n, args.steps, args.rounds, rows, log)
        add_bandwidth(size, model, bw, ndev)
        out["sizes"].append(size)
        if not args.json:
            for row, res in size["rows"].items():
                for mode in ("forward", "gradient"):
                    if f"{mode}_time_s" in res:
                        log(
                            f"  {row:<8} {mode:<8} {fmt_time(res[f'{mode}_time_s']):>14}  "
                            f"{res[f'{mode}_ball_steps_per_s']:.2g} ball-steps/s  floor "
                            f"{fmt_sig(res[f'{mode}_floor_fraction'])} of bandwidth; loop model "
                            f"{fmt_sig(res[f'{mode}_model_bytes_per_ball_step'])} B/ball-step = "
                            f"{fmt_sig(res[f'{mode}_effective_Bps'] / 1e9)} GB/s = "
                            f"{fmt_sig(res[f'{mode}_model_fraction'])} of bandwidth"
                        )
                    elif f"{mode}_skipped" in res or f"{mode}_error" in res:
                        why = res.get(f"{mode}_skipped") or res.get(f"{mode}_error")
                        log(f"  {row:<8} {mode:<8} not run: {why}")
                if "skipped" in res:
                    log(f"  {row:<8} skipped: {res['skipped']}")
    if args.json:
        print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
