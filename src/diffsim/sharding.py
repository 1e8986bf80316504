"""Devices: the samples and batch axes over a ``jax.sharding.Mesh`` (the estimators, the
doctor and :func:`shard_batch` split their work by the same rule; see
``docs/guides/devices.md``).

Every estimator, :func:`~diffsim.diagnose` and :func:`~diffsim.doctor.diagnose_rollout`
take ``devices=`` and build their mesh themselves; the three functions here are for a
batched rollout of your own (:func:`shard_batch`), an explicit mesh (:func:`device_mesh`)
and a run over many processes (:func:`initialize_distributed`).

Example:
    >>> import diffsim.sharding
    >>> diffsim.sharding.device_mesh(1) is None  # one device: no mesh
    True
"""

from ._sharding import device_mesh as device_mesh
from ._sharding import initialize_distributed as initialize_distributed
from ._sharding import shard_batch as shard_batch

__all__ = ["device_mesh", "initialize_distributed", "shard_batch"]
