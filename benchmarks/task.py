"""The benchmark task, shared by every framework: N bouncing balls in 2-D.

State ``(x, y, vx, vy)`` (float32, one array per component: struct of arrays), semi-implicit
Euler with ``h = 1/240`` s under gravity ``g = 9.81`` m/s², then a ground impulse::

    vy <- vy - g h;  x <- x + vx h;  y <- y + vy h
    if y < 0 and vy < 0:  vy <- -e vy,  y <- -y        (e = 0.8)

for ``T`` steps; loss ``L = Σ_i (x_T,i − 3)² + (y_T,i − 0.5)²``. The gradient is taken with
respect to every ball's initial ``vy``. The update is written in exactly this order (no fused
multiply-adds asked for) in every framework, so the contact flags agree bit for bit in most
balls and the gradients agree to float32 rounding.
"""

from __future__ import annotations

import dataclasses

import numpy as np

H = 1.0 / 240.0
G = 9.81
E = 0.8
X_TARGET = 3.0
Y_TARGET = 0.5
GH = float(np.float32(G) * np.float32(H))
"""``g h`` rounded as float32 arithmetic gives it (``float32(g) * float32(h)``), so that every
framework subtracts the very same number each step."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One problem size: ``n`` balls for ``steps`` steps."""

    n: int
    steps: int = 1000

    @property
    def ball_steps(self) -> int:
        return self.n * self.steps


def initial_state(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Deterministic float32 initial states ``(x0, y0, vx0, vy0)``, each of shape (n,).

    Heights 0.5–2 m and vertical speeds −2…2 m/s: every ball bounces several times in
    T = 1000 steps (4.2 s).
    """
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0.0, 1.0, n).astype(np.float32)
    y0 = rng.uniform(0.5, 2.0, n).astype(np.float32)
    vx0 = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    vy0 = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    return x0, y0, vx0, vy0


def flops_per_ball_step() -> dict[str, float]:
    """Arithmetic of the task per ball and step (forward; backward by the adjoint).

    Forward: ``vy - g h`` (1), ``x + vx h`` (2), ``y + vy h`` (2), two compares (2), and on
    contact two negations/scales (2, counted always as the branch-free code does): 9.
    Backward (adjoint of the piecewise-linear step, from the contact flag): two flag
    selects (2) and two multiply-adds (4): 6, plus the forward it replays when the flags are
    not stored. The floor counts forward 9 + backward 6 = 15.
    """
    return {"forward": 9.0, "gradient": 15.0}


def bytes_per_ball_step(n: int, steps: int) -> dict[str, float]:
    """Memory traffic per ball-step that no implementation can avoid.

    Reading the 4 initial floats and writing the final state (and, for the gradient, the
    gradient) is spread over ``steps`` steps; the gradient must also remember one contact
    bit per ball-step for the backward pass (1/8 byte if packed, written once and read once).
    This is tiny: the task is compute-bound by its serial per-ball dependency chain.
    """
    io = 4 * 4 * 2 / steps
    return {"forward": io, "gradient": io + 4 / steps + 2 * (1 / 8)}
