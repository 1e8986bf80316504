"""Closed-loop control: a policy ``π(obs, θ) -> u`` rolled out every step, and the objective
the estimators smooth with noise on every step's action (Suh et al.'s policy setting; see
``docs/guides/control.md``). The control tasks built on it are :data:`diffsim.TASKS`.

Example:
    >>> import jax.numpy as jnp
    >>> from diffsim.policies import linear_policy
    >>> linear_policy(jnp.array([1.0, 2.0]), jnp.array([[1.0, 0.5]])).tolist()  # u = Θ·obs
    [2.0]
"""

from ._policy import PolicyObjective as PolicyObjective
from ._policy import linear_policy as linear_policy
from ._policy import mlp_policy as mlp_policy
from ._policy import rollouts_per_call as rollouts_per_call

__all__ = ["PolicyObjective", "linear_policy", "mlp_policy", "rollouts_per_call"]
