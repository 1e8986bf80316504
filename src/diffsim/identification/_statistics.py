"""What the Jacobian at the estimate says: identifiability (the column-normalised
Jacobian's singular values), the Gauss–Newton covariance and the t quantile of the
intervals."""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

CONFIDENCE = 0.95
"""The level of :attr:`IdentifyResult.interval_low` / ``interval_high``."""


class NotIdentifiableError(ValueError):
    """The data do not determine some of the fitted parameters (a rank-deficient JᵀJ).

    Attributes:
        parameters: the names of the parameters in the directions the data do not see.
        singular_values: the relative singular values of the column-normalised Jacobian.

    Example:
        >>> from diffsim import NotIdentifiableError
        >>> err = NotIdentifiableError("m and k only enter as k/m", ("m", "k"), (1.0, 0.0))
        >>> isinstance(err, ValueError), err.parameters
        (True, ('m', 'k'))
    """

    def __init__(self, message: str, parameters: Sequence[str], singular_values: Sequence[float]):
        super().__init__(message)
        self.parameters = tuple(parameters)
        self.singular_values = tuple(float(s) for s in singular_values)


def _theta_block(J: np.ndarray, p: int) -> np.ndarray:
    """θ's columns of J with what the other unknowns (shooting's start states) can explain
    projected out: the Jacobian whose singular values say what the data pin in θ when the
    starts are fitted too (the Schur complement of JᵀJ)."""
    if J.shape[1] == p:
        return J
    Jt, Js = J[:, :p], J[:, p:]
    coef, *_ = np.linalg.lstsq(Js, Jt, rcond=None)
    return Jt - Js @ coef


def _covariance(r: np.ndarray, J: np.ndarray, p: int, dof: int, rank_rtol: float) -> np.ndarray:
    """θ's block of s²·(JᵀJ)⁻¹, s² = ‖r‖²/dof (r the data's residuals), through the column-
    normalised Jacobian's SVD with directions below ``rank_rtol`` dropped."""
    s2 = float(r @ r) / dof
    norms = np.linalg.norm(J, axis=0)
    D = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    _, S, Vt = np.linalg.svd(J * D, full_matrices=False)
    keep = S > rank_rtol * (S[0] if S.size and S[0] > 0 else 1.0)
    inv = (Vt.T[:, keep] / S[keep] ** 2) @ Vt[keep]
    return s2 * (D[:, None] * inv * D[None, :])[:p, :p]


def _t_quantile(dof: int) -> float:
    """Student's t quantile of the intervals' :data:`CONFIDENCE`."""
    from scipy import stats  # a dependency of jax

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof))


def _fmt(sv) -> str:
    return "[" + ", ".join(f"{s:.2g}" for s in sv) + "]"


def _check_finite_jacobian(r, J, labels) -> None:
    if not bool(jnp.all(jnp.isfinite(r))):
        raise ValueError("the simulation at the start gives non-finite observations: change it")
    if not bool(jnp.isfinite(jnp.sum(jnp.square(r)))):  # least squares squares them
        raise ValueError(
            f"the residuals at the start are finite but their sum of squares overflows "
            f"{r.dtype} (largest |residual| {float(jnp.max(jnp.abs(r))):.3g}): the start is "
            f"too far from the data to fit from; start nearer (a value of the data's scale)"
        )
    bad = [labels[j] for j in range(J.shape[1]) if not bool(jnp.all(jnp.isfinite(J[:, j])))]
    if bad:
        raise ValueError(f"the Jacobian at the start is not finite for {', '.join(bad)}")


def _scaled_svd(J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Relative singular values (descending) of the column-normalised Jacobian, and V."""
    norms = np.linalg.norm(J, axis=0)
    Jn = J / np.where(norms > 0, norms, 1.0)
    _, S, Vt = np.linalg.svd(Jn, full_matrices=False)
    rel = S / S[0] if S.size and S[0] > 0 else np.zeros_like(S)
    return rel, Vt.T


def _unidentified(sv, V, labels, rank_rtol) -> tuple[str, ...]:
    bad = set()
    for j in np.where(sv < rank_rtol)[0]:
        # the parameters that move along this unseen (unit) direction: the ones with a
        # component above 0.05 (0.25 % of its length squared)
        bad |= {labels[i] for i in np.where(np.abs(V[:, j]) > 0.05)[0]}
    return tuple(n for n in labels if n in bad)
