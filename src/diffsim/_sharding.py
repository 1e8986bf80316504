"""Devices: the samples and batch axes over a ``jax.sharding.Mesh``.

diffsim's heavy work is embarrassingly parallel — the samples of a randomized estimator,
the doctor's probes, the systems of a batched rollout. An estimator runs as one
``jit``-compiled program over a mesh of devices: each device evaluates its share of the
samples (``shard_map``; XLA carries the split back to the draws, which with JAX's
partitionable threefry — the default since JAX 0.5 — each device then makes for its own
rows, the same numbers one device draws), and XLA partitions what reads them (GSPMD): sums
over the samples become per-device partial sums and one all-reduce, so no device ever holds
all N samples, and the memory per device stays flat at a fixed number of samples per
device. The decisions made from those sums (auto's choice, AoBG's α) are the same on every
device. A batched rollout is
split by its batch axis (:func:`shard_batch`).

The random draws do not depend on the sharding, and each sample is evaluated by the same
code; but XLA compiles a device's share of the rows — and the sums over them — into loops
vectorised for that share's size, so values can differ in the last bit (measured: 1 ulp in
some of 30 float32 rollouts split 8 per device; bit-identical for 64 split 16 per device).
A sharded estimate therefore equals the one-device estimate for the same key to float
rounding (the partial sums also add in another order) — within 1e-6 of the per-sample
spread (measured: 1e-7; checked in tests/test_sharding.py) — not always bit for bit;
decisions made from the samples (auto's choice, α, the doctor's flags) come out the same.
The doctor keeps every sample (its sequential test reads them on the host), so its buffers
are on every device.

``devices`` is accepted by the estimators, :func:`~diffsim.diagnose`,
:func:`~diffsim.doctor.diagnose_rollout` and :func:`shard_batch`:

* ``None`` (default): every device JAX sees (``jax.devices()``: all local devices, and in a
  multi-process run started by :func:`initialize_distributed`, every process's) when there
  are several; the plain one-device program otherwise;
* an ``int`` n: the first n of ``jax.devices()`` (1: one device, no mesh);
* a sequence of ``jax.Device``: those devices;
* a ``jax.sharding.Mesh``: the samples axis is split over all of its axes.

On a CPU-only machine JAX sees one device; ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
(or ``jax.config.update("jax_num_cpu_devices", N)`` before JAX starts) gives it N, each
running on the process's thread pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "samples"
"""The mesh axis name diffsim gives the meshes it builds."""

Devices = Any
"""``None``, an ``int``, a sequence of ``jax.Device`` or a ``jax.sharding.Mesh``."""


def _more_devices_hint() -> str:
    return (
        "on a CPU-only machine, start Python with "
        "XLA_FLAGS=--xla_force_host_platform_device_count=N (or call "
        "jax.config.update('jax_num_cpu_devices', N) before JAX starts)"
    )


def check_devices(devices: Devices) -> Devices:
    """``devices`` as a hashable value (lists become tuples), checked for its type; the
    count is checked against the devices JAX sees in :func:`device_mesh`."""
    if devices is None or isinstance(devices, Mesh):
        return devices
    if isinstance(devices, bool):
        raise TypeError(f"devices must be None, an int >= 1, devices or a Mesh, got {devices!r}")
    if isinstance(devices, (int, np.integer)):
        if devices < 1:
            raise ValueError(f"devices must be >= 1, got {devices}")
        return int(devices)
    if isinstance(devices, Sequence) and not isinstance(devices, (str, bytes)):
        devs = tuple(devices)
        if not devs or not all(isinstance(d, jax.Device) for d in devs):
            raise TypeError(f"devices must be a non-empty sequence of jax.Device, got {devices!r}")
        if len(set(devs)) != len(devs):
            raise ValueError(f"devices lists a device twice: {devs}")
        return devs
    raise TypeError(
        f"devices must be None, an int >= 1, a sequence of jax.Device or a "
        f"jax.sharding.Mesh, got {devices!r}"
    )


def device_mesh(devices: Devices = None) -> Mesh | None:
    """The mesh ``devices`` names (see the module docstring), or ``None`` for one device.

    Raises:
        ValueError: an ``int`` above the number of devices JAX sees (the message says how
            to get more on a CPU).

    Example:
        >>> import diffsim.sharding
        >>> diffsim.sharding.device_mesh(1) is None
        True
    """
    devices = check_devices(devices)
    if isinstance(devices, Mesh):
        return devices
    if devices is None:
        found = jax.devices()
        return Mesh(np.array(found), (AXIS,)) if len(found) > 1 else None
    if isinstance(devices, int):
        found = jax.devices()
        if devices > len(found):
            raise ValueError(
                f"devices must be in [1, {len(found)}] (the {found[0].platform} devices JAX "
                f"sees), got {devices}; {_more_devices_hint()}"
            )
        return None if devices == 1 else Mesh(np.array(found[:devices]), (AXIS,))
    return Mesh(np.array(devices), (AXIS,))


def device_count(mesh: Mesh | None) -> int:
    """How many devices a mesh from :func:`device_mesh` spans (1 for ``None``)."""
    return 1 if mesh is None else int(mesh.devices.size)


def _rows(mesh: Mesh, ndim: int) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names), *([None] * (ndim - 1))))


def shard_rows(tree: Any, mesh: Mesh | None) -> Any:
    """Inside ``jit``: constrain the leading axis of every leaf to be split over ``mesh``
    (a no-op for ``None``). Uneven splits are padded by XLA, not by the caller."""
    if mesh is None:
        return tree
    return jax.tree_util.tree_map(
        lambda a: jax.lax.with_sharding_constraint(a, _rows(mesh, a.ndim)) if a.ndim else a,
        tree,
    )


def _shard_map(f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any) -> Any:
    # f may close over traced values (the loss's closure): the replication check is off
    if hasattr(jax, "shard_map"):  # JAX >= 0.6
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # JAX 0.4.x

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


def sample_map(f: Callable[..., Any], points: Any, mesh: Mesh | None) -> Any:
    """``jax.vmap(f)(points)`` with the samples (leading) axis split over ``mesh``: device k
    evaluates rows [k·c, (k+1)·c), c = ⌈N / D⌉ (``shard_map``; the rows padded with copies
    of the first, whose results are dropped), and the results stay split over the devices —
    what reads them next (a sum, a mean) is partitioned by XLA, so no device holds all N.
    Each row's value is the one-device ``vmap``'s, up to how XLA vectorises a loop over c
    rows instead of N (the last bit; see the module docstring)."""
    if mesh is None:
        return jax.vmap(f)(points)
    n = jax.tree_util.tree_leaves(points)[0].shape[0]
    size = device_count(mesh)
    pad = -n % size
    if pad:
        points = jax.tree_util.tree_map(
            lambda a: jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad, *a.shape[1:]))]), points
        )
    rows = PartitionSpec(tuple(mesh.axis_names))
    out = _shard_map(jax.vmap(f), mesh, rows, rows)(shard_rows(points, mesh))
    return jax.tree_util.tree_map(lambda o: o[:n], out) if pad else out


BASIS_CHUNK = 1024
""":func:`basis_map` evaluates at most this many coordinate directions at once."""


def basis_map(f: Callable[[Any], Any], d: int, scale: Any, dtype: Any) -> Any:
    """``jax.vmap(f)`` over the rows of ``scale · I_d`` (the coordinate directions), stacked
    on a leading axis of d — without forming the d × d identity: up to
    :data:`BASIS_CHUNK` rows are built (one-hot) and evaluated at once, the chunks in a
    ``lax.map``, so memory holds ``BASIS_CHUNK`` evaluations rather than d. At d <=
    :data:`BASIS_CHUNK` it is one ``vmap`` over ``scale · jnp.eye(d)``."""
    scale = jnp.asarray(scale, dtype)
    if d <= BASIS_CHUNK:
        return jax.vmap(f)(jnp.eye(d, dtype=dtype) * scale)
    chunks = -(-d // BASIS_CHUNK)

    def block(start):
        rows = jax.nn.one_hot(start + jnp.arange(BASIS_CHUNK), d, dtype=dtype) * scale
        return jax.vmap(f)(rows)  # rows past d are zero: evaluated and dropped

    out = jax.lax.map(block, jnp.arange(chunks) * BASIS_CHUNK)
    return jax.tree_util.tree_map(lambda o: o.reshape(-1, *o.shape[2:])[:d], out)


def shard_batch(tree: Any, devices: Devices = None) -> Any:
    """Split the leading (batch) axis of every leaf of ``tree`` over ``devices``.

    Outside ``jit`` it places the arrays (``jax.device_put``; the batch must then divide
    evenly by the number of devices), so that a ``jit``-compiled ``vmap`` of
    :func:`~diffsim.rollout` over them runs sharded — computation follows data. Inside
    ``jit`` it adds a sharding constraint (any batch size). With one device it returns
    ``tree`` unchanged.

    Raises:
        ValueError: outside ``jit``, a batch size not divisible by the number of devices
            (the message names the leaf's shape and the device count).

    Example:
        >>> import jax, jax.numpy as jnp, diffsim.sharding
        >>> y0 = diffsim.sharding.shard_batch(jnp.arange(8.0))  # unchanged on one device
        >>> float(jax.jit(jax.vmap(lambda y: y * 2))(y0).sum())
        56.0
    """
    mesh = device_mesh(devices)
    if mesh is None:
        return tree
    leaves = jax.tree_util.tree_leaves(tree)
    if leaves and all(not isinstance(a, Tracer) for a in leaves):
        n = device_count(mesh)
        for a in leaves:
            shape = np.shape(a)
            if not shape or shape[0] % n:
                raise ValueError(
                    f"shard_batch needs a leading batch axis divisible by the {n} devices "
                    f"outside jit, got a leaf of shape {shape}; pad the batch or call "
                    f"shard_batch inside jit (XLA pads uneven splits)"
                )
        return jax.tree_util.tree_map(lambda a: jax.device_put(a, _rows(mesh, np.ndim(a))), tree)
    return shard_rows(tree, mesh)


def initialize_distributed(**kwargs: Any) -> bool:
    """Join a multi-process JAX run (``jax.distributed.initialize``) from the environment.

    Reads ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0), ``JAX_NUM_PROCESSES``
    and ``JAX_PROCESS_ID`` when set — otherwise JAX detects the cluster itself (Slurm,
    Open MPI, Kubernetes, Cloud TPU); keyword arguments override both. On CPU it selects the
    gloo collectives, so processes exchange results over TCP. Afterwards ``jax.devices()``
    lists every process's devices, and diffsim's default mesh spans them all.

    Returns ``False`` (and does nothing) when no coordinator is configured and JAX detects
    no cluster, ``True`` once joined. Every process must run the same program.

    Example:
        >>> import diffsim.sharding
        >>> diffsim.sharding.initialize_distributed()  # no coordinator here: one process, a no-op
        False

    A two-process launch on one machine (each with two CPU devices), then every estimator
    splits its samples over all four devices::

        JAX_COORDINATOR_ADDRESS=127.0.0.1:12355 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=0 \
            XLA_FLAGS=--xla_force_host_platform_device_count=2 python my_script.py &
        JAX_COORDINATOR_ADDRESS=127.0.0.1:12355 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=1 \
            XLA_FLAGS=--xla_force_host_platform_device_count=2 python my_script.py
    """
    args: dict[str, Any] = {}
    if address := os.environ.get("JAX_COORDINATOR_ADDRESS"):
        args["coordinator_address"] = address
    for name, var in (("num_processes", "JAX_NUM_PROCESSES"), ("process_id", "JAX_PROCESS_ID")):
        if value := os.environ.get(var):
            try:
                args[name] = int(value)
            except ValueError:
                raise ValueError(f"{var} must be an integer, got {value!r}") from None
    args.update(kwargs)
    if "coordinator_address" not in args and not _cluster_detected():
        return False
    # CPU devices exchange results over TCP (gloo); it leaves accelerators' collectives alone
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**args)
    return True


def _cluster_detected() -> bool:
    return any(
        v in os.environ
        for v in (
            "SLURM_JOB_ID",
            "OMPI_COMM_WORLD_SIZE",
            "TPU_WORKER_HOSTNAMES",
            "JOB_COMPLETION_INDEX",
        )
    )
