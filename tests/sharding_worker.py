"""Runs diffsim's sharded paths in a process of its own (tests/test_sharding.py).

The device count of a JAX process is fixed when JAX starts, so the tests run this script
in subprocesses: ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` gives D CPU
devices. It prints one JSON object (the last line of stdout) with every number the tests
compare: each estimator's estimate on one device and on D (and 3) devices for the same
key, the doctor's verdict, an optimisation, a batched rollout, and the compiled program's
per-device memory.

    python tests/sharding_worker.py single     # D devices in this process
    python tests/sharding_worker.py multi      # one process of a jax.distributed run
                                               # (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
                                               # JAX_PROCESS_ID in the environment)
"""

from __future__ import annotations

import json
import re
import sys


def _estimators(devices):
    from diffsim.estimators import AlphaOrder, Auto, FirstOrder, ZerothOrder

    return {
        "zeroth": ZerothOrder(sigma=0.5, num_samples=30, devices=devices),
        "zeroth-antithetic": ZerothOrder(
            sigma=0.5, num_samples=32, antithetic=True, devices=devices
        ),
        "first": FirstOrder(sigma=0.5, num_samples=30, devices=devices),
        "alpha": AlphaOrder(sigma=0.5, num_samples=30, gamma=5.0, devices=devices),
        "auto": Auto(num_samples=30, devices=devices),
    }


def _estimate_row(est, loss, theta, key) -> dict:
    r = est(loss, theta, key)
    return {
        "estimate": float(r.estimate),
        "std_error": float(r.std_error),
        "spread": float(r.std_error) * est.num_samples**0.5,
        "evaluations": int(r.evaluations),
    }


def main(mode: str) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import diffsim
    from diffsim.systems import projectile_wall as pw

    if mode == "multi":
        assert diffsim.sharding.initialize_distributed(), "no coordinator in the environment"
    out: dict = {
        "process": jax.process_index(),
        "processes": jax.process_count(),
        "devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
    }
    key = jax.random.PRNGKey(7)
    theta = jnp.asarray(9.3)  # 0.1 m/s below the wall's cliff: jumps within σ
    configs = {"all": None} if mode == "multi" else {"one": 1, "all": None, "three": 3}
    for name, devices in configs.items():
        out[name] = {
            k: _estimate_row(e, pw.loss, theta, key) for k, e in _estimators(devices).items()
        }
    if mode == "multi":
        return out

    # the doctor: same verdict and flags, statistics to rounding
    diag = {}
    for name, devices in (("one", 1), ("all", None)):
        d = diffsim.diagnose(pw.loss, theta, key, sigma=0.5, num_samples=32, devices=devices)
        diag[name] = {
            "verdict": d.verdict,
            "flags": list(d.flag_names),
            "samples": d.evaluations["samples"],
            "smoothed": float(np.ravel(d.measurements["zeroth_mean"])[0]),
        }
    out["diagnose"] = diag

    # optimize with a sharded estimator (inside the optimisation's lax.scan)
    opt = {}
    for name, devices in (("one", 1), ("all", None)):
        est = diffsim.estimators.AlphaOrder(sigma=0.5, num_samples=16, gamma=5.0, devices=devices)
        r = diffsim.optimize(
            pw.loss, jnp.asarray(8.0), est, steps=10, key=key, optimizer=optax.adam(0.3)
        )
        opt[name] = {"theta": float(r.theta), "loss": float(r.loss)}
    out["optimize"] = opt

    # a batched rollout split by its batch axis: a pure map, no reduction
    from diffsim.contact import Plane, Restitution, WithContact
    from diffsim.integrators import SemiImplicitEuler

    def gravity(x, v, th):
        return jnp.stack([jnp.zeros_like(th), -th])

    step = WithContact(
        SemiImplicitEuler(gravity, h=1 / 240),
        Restitution(Plane.ground(2), e=0.8, position="reflect"),
    )

    def final_y(y0):
        s0 = (jnp.stack([0.0, y0]), jnp.zeros(2))
        return diffsim.rollout(step, s0, jnp.asarray(9.81), 500, trajectory=False)[0][1]

    run = jax.jit(jax.vmap(jax.value_and_grad(final_y)))
    y0 = jnp.linspace(0.5, 2.0, 64)
    v1, g1 = run(y0)
    sharded = diffsim.sharding.shard_batch(y0)
    v4, g4 = run(sharded)
    # value_and_grad over a batch of 30 systems (padded to 32 on 4 devices), both modes
    y30 = jnp.linspace(0.5, 2.0, 30)
    vag = {
        mode: [
            diffsim.value_and_grad(final_y, y30, batched=True, mode=mode, devices=d)
            for d in (1, None)
        ]
        for mode in ("forward", "reverse")
    }
    out["rollout"] = {
        "vag_max_diff": max(
            float(np.max(np.abs(np.asarray(a.value) - np.asarray(b.value))))
            + float(np.max(np.abs(np.asarray(a.grad) - np.asarray(b.grad))))
            for a, b in vag.values()
        ),
        "vag_scale": float(np.max(np.abs(np.asarray(vag["reverse"][0].value)))),
        "vag_devices": len(vag["reverse"][1].grad.sharding.device_set),
        "equal": bool(np.array_equal(v1, v4) and np.array_equal(g1, g4)),
        "input_devices": len(sharded.sharding.device_set),
        "output_devices": len(v4.sharding.device_set),
        "max_abs_diff": float(np.max(np.abs(np.asarray(v1) - np.asarray(v4)))),
    }

    # the sharded estimator really divides the samples: each device evaluates ⌈N / D⌉
    est = diffsim.estimators.ZerothOrder(sigma=0.5, num_samples=32, devices=None)
    from diffsim.estimators._noise import noise_for
    from diffsim.estimators.zeroth_order import _zeroth

    mesh = diffsim.sharding.device_mesh(None)
    noise = noise_for(pw.loss, theta, est.sigma)
    text = (
        jax.jit(lambda t, k: _zeroth(noise, t, k, 32, False, mesh))
        .lower(theta, key)
        .compile()
        .as_text()
    )
    out["hlo_collectives"] = sorted(
        set(re.findall(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all)\(", text))
    )
    return out


if __name__ == "__main__":
    result = main(sys.argv[1])
    print(json.dumps(result))
