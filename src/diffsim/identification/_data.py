"""The recordings stacked for one ``vmap`` of the rollout (shorter ones padded with missing
samples), and ``observe`` restricted to the recorded signals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._recording import Recording


class _Data(eqx.Module):
    s0: Any  # stacked over recordings
    inputs: Any  # (R, T, ...) or None
    observed: dict[str, Any]  # (R, T, k), NaN replaced by 0
    mask: dict[str, Any]  # (R, T, k) bool
    weights: dict[str, Any]  # (R, T, k)


def _stack(recordings: Sequence[Recording], dtype) -> tuple[_Data, int]:
    T = max(r.num_steps for r in recordings)
    names = list(recordings[0].signals)
    for i, r in enumerate(recordings):
        if list(r.signals) != names:
            raise ValueError(
                f"recordings[{i}] has the signals {list(r.signals)}, recordings[0] {names}: "
                f"every recording must observe the same signals"
            )
    obs, mask, wts = {}, {}, {}
    for k in names:
        widths = {np.shape(r.signals[k])[1] for r in recordings}
        if len(widths) != 1:
            raise ValueError(f"signal {k!r} has different widths across recordings: {widths}")
        rows, ms, ws = [], [], []
        for r in recordings:
            y = np.asarray(r.signals[k], dtype=float)[1:]
            w = np.broadcast_to(
                np.asarray((r.weights or {}).get(k, 1.0), dtype=float),
                np.asarray(r.signals[k]).shape,
            )[1:]
            pad = T - y.shape[0]
            y = np.concatenate([y, np.full((pad, y.shape[1]), np.nan)])
            w = np.concatenate([w, np.zeros((pad, y.shape[1]))])
            ms.append(np.isfinite(y) & (w > 0))
            rows.append(np.where(np.isfinite(y), y, 0.0))
            ws.append(w)
        obs[k] = jnp.asarray(np.stack(rows), dtype)
        mask[k] = jnp.asarray(np.stack(ms))
        wts[k] = jnp.asarray(np.stack(ws), dtype)

    def pad_inputs(r: Recording):
        return jax.tree_util.tree_map(
            lambda a: jnp.concatenate(
                [
                    jnp.asarray(a),
                    jnp.zeros((T - np.shape(a)[0],) + np.shape(a)[1:], jnp.asarray(a).dtype),
                ]
            ),
            r.inputs,
        )

    has_inputs = [r.inputs is not None for r in recordings]
    if any(has_inputs) and not all(has_inputs):
        raise ValueError("either every recording has inputs (controls) or none has")
    inputs = None
    if all(has_inputs):
        inputs = jax.tree_util.tree_map(
            lambda *a: jnp.stack(a), *[pad_inputs(r) for r in recordings]
        )
    s0 = jax.tree_util.tree_map(
        lambda *a: jnp.stack([jnp.asarray(x) for x in a]), *[r.s0 for r in recordings]
    )
    return _Data(s0, inputs, obs, mask, wts), T


class _Subset(eqx.Module):
    """``observe`` restricted to the recorded signals, each raveled to a vector."""

    observe: Any
    keys: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, state):
        out = self.observe(state)
        return {k: jnp.ravel(jnp.asarray(out[k])) for k in self.keys}
