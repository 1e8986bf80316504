r"""DiffTaichi's mass-spring robots (Hu et al., ICLR 2020, ``examples/mass_spring.py``):
point masses joined by springs, some of them muscles driven by a neural controller,
walking on a ground with friction.

A :class:`Robot` is a list of points (x, y) and springs in DiffTaichi's config format
``[a, b, rest length, stiffness, actuation]``; the built-ins ``A``–``D`` are the robots of
``mass_spring_robot_config.py``. Every point has unit mass. One step of h = 0.004 (DiffTaichi's
``dt``), for each spring s = (a, b) with actuation α and controller output act ∈ (−1, 1):

.. math::
    d = x_a - x_b, \quad ℓ = |d| + 10^{-4}, \quad ℓ^* = L (1 + α\,\mathrm{act}), \quad
    J_s = h\,k\,(ℓ - ℓ^*)\,d / ℓ,

the impulse −J_s on a and +J_s on b; then every point's velocity is damped and pulled down,
:math:`v' = e^{-15 h} v + h g e_y + Δv` (g = −4.8), and meets the ground y = 0.1:

- without TOI (DiffTaichi's ``advance_no_toi``): a point below the ground moving down stops
  dead (both components: the ground's friction holds it), and :math:`x' = x + h v'`;
- with TOI (``advance_toi``): a point whose free step would end below the ground, moving down
  faster than 10⁻⁴, moves to the ground at the time of impact τ = (0.1 − y)/v'_y and stops
  there, :math:`x' = x + τ v'`.

DiffTaichi's ``friction = 2.5`` is declared but never used; the ground's friction is the
full stop above. The controller (:func:`controller`) sees 10 sine waves of time
:math:`\sin(10\,t + 2πj/10)`, each point's offset from the centre and velocity (×0.05) and
the goal (0.9, 0.2) minus the centre; 32 tanh hidden units; one tanh output per spring.
The loss is −x of the head (point 0) after 681 steps (states 0 … 681: DiffTaichi's
``steps = 2048 // 3 = 682`` states), and DiffTaichi's recipe (:data:`RECIPE`,
:func:`train`) is 100 iterations of gradient descent normalised to a step of 0.2 in θ.

Example:
    >>> import jax
    >>> from diffsim.systems import mass_spring_robot as msr
    >>> msr.ROBOTS
    ('A', 'B', 'C', 'D')
    >>> robot = msr.Robot.builtin("A")
    >>> robot.num_points, robot.num_springs
    (6, 11)
    >>> theta = msr.controller_init(robot, jax.random.PRNGKey(0))
    >>> x, v = msr.rollout(robot, theta, num_steps=50)
    >>> x.shape
    (50, 6, 2)

    DiffTaichi's constants:

    >>> msr.H, msr.NUM_STEPS, msr.GRAVITY, msr.DAMPING, msr.GROUND_HEIGHT
    (0.004, 682, -4.8, 15.0, 0.1)
    >>> msr.SPRING_OMEGA, msr.NUM_SINES, msr.NUM_HIDDEN, msr.GOAL, msr.INPUT_SCALE, msr.HEAD
    (10.0, 10, 32, (0.9, 0.2), 0.05, 0)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from .._checks import INT32_MAX, check_int, check_key
from .._optimize import OptimizeResult, optimize
from .._policy import PolicyObjective
from .._rollout import rollout as _rollout
from ..estimators import Exact

__all__ = [
    "DAMPING",
    "GOAL",
    "GRAVITY",
    "GROUND_HEIGHT",
    "HEAD",
    "INPUT_SCALE",
    "NUM_HIDDEN",
    "NUM_SINES",
    "NUM_STEPS",
    "RECIPE",
    "ROBOTS",
    "SPRING_OMEGA",
    "H",
    "Recipe",
    "Robot",
    "RobotState",
    "controller",
    "controller_init",
    "initial_state",
    "normalised_descent",
    "objective",
    "observe",
    "problem",
    "rollout",
    "step",
    "train",
]

H = 0.004
"""Time step (s), DiffTaichi's ``dt``."""
NUM_STEPS = 682
"""States in a rollout, DiffTaichi's ``steps = 2048 // 3`` (681 steps between them)."""
GRAVITY = -4.8
"""Vertical acceleration (m/s²)."""
DAMPING = 15.0
"""Velocity damping rate (1/s): v is multiplied by exp(−15 h) every step."""
GROUND_HEIGHT = 0.1
"""The ground's height (m)."""
SPRING_OMEGA = 10.0
"""Angular frequency of the controller's sine inputs (rad/s)."""
NUM_SINES = 10
"""Sine inputs of the controller, phases 2πj/10."""
NUM_HIDDEN = 32
"""Hidden tanh units of the controller."""
GOAL = (0.9, 0.2)
"""The goal the controller sees (its offset from the robot's centre is an input)."""
INPUT_SCALE = 0.05
"""Scale of the offsets and velocities fed to the controller ("a smaller weight since there
are too many of them")."""
HEAD = 0
"""The head's index: the loss is minus its final x."""
_LENGTH_EPS = 1e-4  # DiffTaichi adds it to every spring's length
_TOI_SPEED = 1e-4  # DiffTaichi's TOI ignores points approaching slower than this


class Recipe(NamedTuple):
    """DiffTaichi's training recipe (``optimize`` in ``mass_spring.py``): read it as
    :data:`RECIPE`.

    Example:
        >>> from diffsim.systems.mass_spring_robot import RECIPE
        >>> RECIPE.iterations, RECIPE.step_size
        (100, 0.2)
    """

    iterations: int = 100
    """Gradient steps."""
    step_size: float = 0.2
    """Length of every step in θ: θ ← θ − 0.2 g / (|g| + 10⁻⁶) (DiffTaichi's
    ``gradient_clip``; its ``learning_rate = 25`` is unused)."""
    w1_scale: float = 2.0
    """First layer's weights ~ N(0, 1)·sqrt(2 / (32 + inputs))·2; biases start at 0."""
    w2_scale: float = 3.0
    """Second layer's weights ~ N(0, 1)·sqrt(2 / (32 + springs))·3."""


RECIPE = Recipe()
"""DiffTaichi's recipe (see :class:`Recipe`)."""


# -- the robot ---------------------------------------------------------------------------


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{field} must be a number, got {value!r}")
    return float(value)


def _index(field: str, value: Any, n: int) -> int:
    if isinstance(value, float | np.floating) and float(value).is_integer():
        value = int(value)  # JSON writers may give 3.0
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{field} must be an integer point index, got {value!r}")
    if not 0 <= int(value) < n:
        raise ValueError(f"{field} index {int(value)} out of range [0, {n})")
    return int(value)


def _check_points(points: Any) -> np.ndarray:
    if isinstance(points, str | bytes) or not isinstance(points, Sequence | np.ndarray):
        raise ValueError(f"points must be a list of [x, y] pairs, got {points!r}")
    if len(points) == 0:
        raise ValueError("points must not be empty")
    out = np.empty((len(points), 2))
    for i, p in enumerate(points):
        if isinstance(p, str | bytes) or not isinstance(p, Sequence | np.ndarray) or len(p) != 2:
            raise ValueError(f"points[{i}]: must be [x, y], got {p!r}")
        out[i] = [_number(f"points[{i}]", c) for c in p]
        if not np.all(np.isfinite(out[i])):
            raise ValueError(f"points[{i}]: coordinates must be finite, got {out[i].tolist()}")
    return out


def _check_spring(i: int, s: Any, x: np.ndarray) -> list[float]:
    """One spring ``[a, b, length, stiffness, actuation]`` checked, its length filled in."""
    if isinstance(s, str | bytes) or not isinstance(s, Sequence | np.ndarray) or len(s) != 5:
        raise ValueError(
            f"springs[{i}]: must be [a, b, rest length, stiffness, actuation], got {s!r}"
        )
    n = x.shape[0]
    a, b = _index(f"springs[{i}]:", s[0], n), _index(f"springs[{i}]:", s[1], n)
    if a == b:
        raise ValueError(f"springs[{i}]: joins point {a} to itself")
    # DiffTaichi's add_spring: no length given -> the distance between the points
    length = float(np.linalg.norm(x[a] - x[b])) if s[2] is None else _number(f"springs[{i}]", s[2])
    if not (math.isfinite(length) and length > 0):
        hint = " (null: the distance between its points)" if s[2] is not None else ""
        raise ValueError(f"springs[{i}]: rest length {length!r} must be finite and > 0{hint}")
    k = _number(f"springs[{i}]", s[3])
    if not (math.isfinite(k) and k > 0):
        raise ValueError(f"springs[{i}]: stiffness {k!r} must be finite and > 0")
    act = _number(f"springs[{i}]", s[4])
    if not math.isfinite(act):
        raise ValueError(f"springs[{i}]: actuation {act!r} must be finite")
    return [a, b, length, k, act]


class Robot(eqx.Module):
    """Points and springs (DiffTaichi's config format), checked.

    Args:
        points: the points' initial positions, a list of ``[x, y]`` (m), at least one.
        springs: a list of ``[a, b, rest length, stiffness, actuation]``: the indices of
            the two points it joins, its rest length (m; ``None``: the distance between
            the points, as DiffTaichi's ``add_spring`` does), its stiffness (per unit mass,
            1/s²) and its actuation α (the controller changes its rest length by the
            factor 1 + α·act, act ∈ (−1, 1); 0: a passive spring). At least one.
        head: the point whose final x the loss maximises (default 0, DiffTaichi's).

    Raises:
        ValueError: one message naming the field and the index: ``"springs[3]: index 12
            out of range [0, 10)"``, ``"points[2]: coordinates must be finite, got [nan,
            0.1]"``, a rest length or stiffness that is not > 0, a spring joining a point to
            itself, an empty list.

    Example:
        >>> from diffsim.systems.mass_spring_robot import Robot
        >>> r = Robot([[0.0, 0.1], [0.3, 0.1], [0.0, 0.5]], [[0, 1, None, 1e4, 0.1],
        ...           [1, 2, 0.5, 1e4, 0.0], [2, 0, None, 1e4, 0.0]])
        >>> [round(v, 3) for v in r.rest_length.tolist()]
        [0.3, 0.5, 0.4]
        >>> Robot([[0.0, 0.1], [0.3, 0.1]], [[0, 2, None, 1e4, 0.1]])
        Traceback (most recent call last):
        ...
        ValueError: springs[0]: index 2 out of range [0, 2)
    """

    points: Array
    a: Array
    b: Array
    rest_length: Array
    stiffness: Array
    actuation: Array
    head: int = eqx.field(static=True)

    def __init__(self, points: Any, springs: Any, head: int = HEAD) -> None:
        x = _check_points(points)
        if isinstance(springs, str | bytes) or not isinstance(springs, Sequence | np.ndarray):
            raise ValueError(f"springs must be a list of springs, got {springs!r}")
        if len(springs) == 0:
            raise ValueError("springs must not be empty (a robot needs at least one spring)")
        rows = [_check_spring(i, s, x) for i, s in enumerate(springs)]
        self.head = _index("head:", head, x.shape[0])
        self.points = jnp.asarray(x)
        self.a = jnp.asarray([r[0] for r in rows], jnp.int32)
        self.b = jnp.asarray([r[1] for r in rows], jnp.int32)
        self.rest_length = jnp.asarray([r[2] for r in rows])
        self.stiffness = jnp.asarray([r[3] for r in rows])
        self.actuation = jnp.asarray([r[4] for r in rows])

    @property
    def num_points(self) -> int:
        """The number of points."""
        return int(self.points.shape[0])

    @property
    def num_springs(self) -> int:
        """The number of springs (the controller's outputs)."""
        return int(self.a.shape[0])

    def springs(self) -> list[list[float]]:
        """The springs in the config format ``[a, b, rest length, stiffness, actuation]``."""
        cols = (self.a, self.b, self.rest_length, self.stiffness, self.actuation)
        return [[int(a), int(b), float(L), float(k), float(s)]
                for a, b, L, k, s in zip(*(np.asarray(c) for c in cols))]  # fmt: skip

    def to_json(self, path: str | os.PathLike[str]) -> None:
        """Write ``{"points": [[x, y], ...], "springs": [[a, b, L, k, α], ...], "head": i}``
        (rest lengths written out) to ``path``; :meth:`from_json` reads it back."""
        data = {
            "points": np.asarray(self.points).tolist(),
            "springs": self.springs(),
            "head": self.head,
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Robot:
        """Read a robot from a JSON file ``{"points": ..., "springs": ..., "head": 0}``
        (``head`` optional; a rest length ``null`` is the distance between the points).

        Raises:
            ValueError: the file cannot be read, is not JSON or not such an object, or a
                field is bad; the message starts with the path (one line, for the CLI).

        Example:
            >>> import os, tempfile
            >>> from diffsim.systems.mass_spring_robot import Robot
            >>> path = os.path.join(tempfile.mkdtemp(), "a.json")
            >>> Robot.builtin("A").to_json(path)
            >>> Robot.from_json(path).num_springs
            11
        """
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        except (OSError, UnicodeDecodeError) as err:  # one ValueError for the CLI's one line
            raise ValueError(f"{path}: cannot read the robot file ({err})") from None
        if not isinstance(data, dict) or not {"points", "springs"} <= set(data):
            raise ValueError(f'{path}: must be an object with "points" and "springs"')
        unknown = set(data) - {"points", "springs", "head"}
        if unknown:
            raise ValueError(f"{path}: unknown fields {sorted(unknown)}")
        try:
            return cls(data["points"], data["springs"], data.get("head", HEAD))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    @classmethod
    def builtin(cls, name: str) -> Robot:
        """DiffTaichi's robot ``"A"``, ``"B"``, ``"C"`` or ``"D"``
        (``mass_spring_robot_config.py``'s ``robotA`` … ``robotD``).

        Example:
            >>> from diffsim.systems.mass_spring_robot import ROBOTS, Robot
            >>> [(Robot.builtin(n).num_points, Robot.builtin(n).num_springs) for n in ROBOTS]
            [(6, 11), (14, 30), (20, 46), (26, 61)]
        """
        if name not in _BUILDERS:
            raise ValueError(f"robot must be one of {list(_BUILDERS)}, got {name!r}")
        points, springs = _BUILDERS[name]()
        return cls(points, springs)


# -- DiffTaichi's robots -----------------------------------------------------------------


def _robot_a() -> tuple[list, list]:
    points = [[0.2, 0.1], [0.3, 0.13], [0.4, 0.1], [0.2, 0.2], [0.3, 0.2], [0.4, 0.2]]
    links = [(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (2, 5), (0, 4), (1, 4), (2, 4), (3, 1),
             (5, 1)]  # fmt: skip
    return points, [[a, b, None, 14000.0, 0.1] for a, b in links]


class _Mesh:
    """The config's mesh builder: grid cells of 0.05 m from (0.1, 0.1), springs of
    stiffness 3e4, a pair of points joined once."""

    def __init__(self) -> None:
        self.points: list[list[float]] = []
        self.ids: dict[tuple[float, float], int] = {}
        self.springs: list[list[Any]] = []
        self.joined: set[frozenset[int]] = set()

    def point(self, i: float, j: float) -> int:
        if (i, j) not in self.ids:
            self.ids[(i, j)] = len(self.points)
            self.points.append([i * 0.05 + 0.1, j * 0.05 + 0.1])
        return self.ids[(i, j)]

    def spring(self, a: int, b: int, actuation: float) -> None:
        if frozenset((a, b)) not in self.joined:
            self.joined.add(frozenset((a, b)))
            self.springs.append([a, b, None, 3e4, actuation])

    def square(self, i: int, j: int, actuation: float = 0.0) -> None:
        a, b = self.point(i, j), self.point(i, j + 1)
        c, d = self.point(i + 1, j), self.point(i + 1, j + 1)
        self.spring(a, b, actuation)  # the two vertical sides are the muscles
        self.spring(c, d, actuation)
        self._all_pairs((a, b, c, d))

    def triangle(self, i: int, j: int) -> None:
        self._all_pairs((self.point(i + 0.5, j + 0.5), self.point(i, j + 1),
                         self.point(i + 1, j + 1)))  # fmt: skip

    def _all_pairs(self, ids: tuple[int, ...]) -> None:
        for p in ids:
            for q in ids:
                if p != q:
                    self.spring(p, q, 0.0)


def _mesh_robot(cells: list[tuple[str, int, int, float]]) -> tuple[list, list]:
    mesh = _Mesh()
    for kind, i, j, actuation in cells:
        if kind == "square":
            mesh.square(i, j, actuation)
        else:
            mesh.triangle(i, j)
    return mesh.points, mesh.springs


_LEGS_AND_BODY = [("square", 0, 2, 0.0), ("square", 1, 2, 0.0), ("square", 2, 1, 0.15),
                  ("square", 2, 2, 0.0)]  # fmt: skip
_BUILDERS = {
    "A": _robot_a,
    "B": lambda: _mesh_robot(
        [("triangle", 2, 0, 0.0), ("triangle", 0, 0, 0.0), ("square", 0, 1, 0.15)] + _LEGS_AND_BODY
    ),
    "C": lambda: _mesh_robot(
        [("square", 2, 0, 0.15), ("square", 0, 0, 0.15), ("square", 0, 1, 0.15)]
        + _LEGS_AND_BODY
        + [("square", 2, 3, 0.0), ("square", 2, 4, 0.0)]
    ),
    "D": lambda: _mesh_robot(
        [("square", 2, 0, 0.15), ("square", 0, 0, 0.15), ("square", 0, 1, 0.15)]
        + _LEGS_AND_BODY
        + [
            ("square", 2, 3, 0.0),
            ("square", 2, 4, 0.0),
            ("square", 3, 1, 0.0),
            ("square", 4, 0, 0.15),
            ("square", 4, 1, 0.15),
        ]
    ),
}
ROBOTS = tuple(_BUILDERS)
"""The built-in robots' names: DiffTaichi's ``robotA`` … ``robotD``."""


# -- dynamics ----------------------------------------------------------------------------


class RobotState(NamedTuple):
    """The state: positions ``x`` (n, 2) (m), velocities ``v`` (n, 2) (m/s) and the step
    index ``t`` (the controller's clock, time t·h).

    Example:
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> s = msr.initial_state(msr.Robot.builtin("A"))
        >>> isinstance(s, msr.RobotState), s.x.shape, int(s.t)
        (True, (6, 2), 0)
    """

    x: Array
    v: Array
    t: Array


def initial_state(robot: Robot) -> RobotState:
    """The robot at rest at its points, t = 0.

    Example:
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> s = msr.initial_state(msr.Robot.builtin("A"))
        >>> [round(float(c), 6) for c in s.x[1]], float(abs(s.v).max())
        ([0.3, 0.13], 0.0)
    """
    return RobotState(robot.points, jnp.zeros_like(robot.points), jnp.zeros((), jnp.int32))


def step(state: RobotState, robot: Robot, act: Array, *, toi: bool = False) -> RobotState:
    """One step of h = 0.004 (the module docstring's formulas), all points and springs at
    once.

    Args:
        state: the :class:`RobotState`.
        robot: the :class:`Robot`.
        act: the controller's outputs, one per spring, shape (springs,), in (−1, 1).
        toi: stop points at the ground's time of impact (DiffTaichi's ``use_toi``).

    Returns:
        The next :class:`RobotState`.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> r = msr.Robot([[0.0, 0.5], [0.1, 0.5]], [[0, 1, None, 100.0, 0.0]])
        >>> s = msr.step(msr.initial_state(r), r, jnp.zeros(1))  # free fall, springs at rest
        >>> round(float(s.v[0, 1]), 4), round(float(s.x[0, 1]), 6)
        (-0.0192, 0.499923)
    """
    x, v, t = state
    d = x[robot.a] - x[robot.b]
    length = jnp.sqrt(jnp.sum(d * d, axis=-1)) + _LENGTH_EPS
    target = robot.rest_length * (1.0 + robot.actuation * act)
    impulse = (H * robot.stiffness * (length - target) / length)[:, None] * d
    dv = jnp.zeros_like(v).at[robot.a].add(-impulse).at[robot.b].add(impulse)
    v1 = math.exp(-H * DAMPING) * v + jnp.asarray([0.0, H * GRAVITY], v.dtype) + dv
    y, vy = x[:, 1], v1[:, 1]
    if toi:
        hit = (y + H * vy < GROUND_HEIGHT) & (vy < -_TOI_SPEED)
        # double where: the untaken branch divides by a safe speed (a finite gradient)
        tau = jnp.where(hit, (GROUND_HEIGHT - y) / jnp.where(hit, vy, -1.0), 0.0)
        v_new = jnp.where(hit[:, None], 0.0, v1)
        x_new = x + tau[:, None] * v1 + (H - tau)[:, None] * v_new
    else:
        hit = (y < GROUND_HEIGHT) & (vy < 0)
        v_new = jnp.where(hit[:, None], 0.0, v1)
        x_new = x + H * v_new
    return RobotState(x_new, v_new, t + 1)


_STEPS = {False: partial(step, toi=False), True: partial(step, toi=True)}


# -- the controller ----------------------------------------------------------------------


def observe(state: RobotState) -> Array:
    """The controller's input: 10 sines of time, each point's offset from the centre and
    velocity (×0.05, interleaved per point as DiffTaichi's ``weights1`` columns), the goal
    minus the centre; shape (10 + 4 n + 2,).

    Example:
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> obs = msr.observe(msr.initial_state(msr.Robot.builtin("A")))
        >>> obs.shape, round(float(obs[0]), 6), [round(float(c), 4) for c in obs[-2:]]
        ((36,), 0.0, [0.6, 0.045])
    """
    x, v, t = state
    phase = SPRING_OMEGA * t * H + 2 * math.pi / NUM_SINES * jnp.arange(NUM_SINES)
    centre = jnp.mean(x, axis=0)
    per_point = INPUT_SCALE * jnp.concatenate([x - centre, v], axis=1)  # (n, 4)
    goal = jnp.asarray(GOAL, x.dtype) - centre
    return jnp.concatenate([jnp.sin(phase).astype(x.dtype), per_point.ravel(), goal])


def controller(obs: Array, theta: dict[str, Array]) -> Array:
    """DiffTaichi's two-layer network: ``tanh(w2 · tanh(w1 · obs + b1) + b2)``, one output
    per spring; θ = ``{"w1": (32, inputs), "b1": (32,), "w2": (springs, 32), "b2":
    (springs,)}``.

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> robot = msr.Robot.builtin("A")
        >>> theta = msr.controller_init(robot, jax.random.PRNGKey(0))
        >>> act = msr.controller(msr.observe(msr.initial_state(robot)), theta)
        >>> act.shape, bool(abs(act).max() < 1)
        ((11,), True)
    """
    hidden = jnp.tanh(theta["w1"] @ obs + theta["b1"])
    return jnp.tanh(theta["w2"] @ hidden + theta["b2"])


def controller_init(robot: Robot, key: Array) -> dict[str, Array]:
    """DiffTaichi's initial θ: weights Gaussian with its scales (:class:`Recipe`), biases 0.

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> theta = msr.controller_init(msr.Robot.builtin("A"), jax.random.PRNGKey(0))
        >>> theta["w1"].shape, theta["w2"].shape  # 10 sines + 4·6 point inputs + 2 goal
        ((32, 36), (11, 32))
    """
    check_key("key", key)
    n_in = NUM_SINES + 4 * robot.num_points + 2
    k1, k2 = jax.random.split(key)
    dtype = robot.points.dtype
    s1 = math.sqrt(2 / (NUM_HIDDEN + n_in)) * RECIPE.w1_scale
    s2 = math.sqrt(2 / (NUM_HIDDEN + robot.num_springs)) * RECIPE.w2_scale
    return {
        "w1": s1 * jax.random.normal(k1, (NUM_HIDDEN, n_in), dtype),
        "b1": jnp.zeros(NUM_HIDDEN, dtype),
        "w2": s2 * jax.random.normal(k2, (robot.num_springs, NUM_HIDDEN), dtype),
        "b2": jnp.zeros(robot.num_springs, dtype),
    }


# -- the task ----------------------------------------------------------------------------


def _no_cost(state: RobotState, act: Array) -> Array:
    return jnp.zeros((), state.x.dtype)


def _minus_head_x(state: RobotState, head: int) -> Array:
    return -state.x[head, 0]


def objective(robot: Robot, *, toi: bool = False, num_steps: int = NUM_STEPS) -> PolicyObjective:
    """The loss −x of the head after ``num_steps − 1`` steps, as a :class:`PolicyObjective`
    of θ (call it, give it to :func:`diffsim.optimize` or an estimator).

    Args:
        robot: the :class:`Robot`.
        toi: ground contact at the time of impact (DiffTaichi's ``use_toi``).
        num_steps: states in the rollout, the initial one included (>= 2; default 682).

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> robot = msr.Robot.builtin("A")
        >>> loss = msr.objective(robot, num_steps=20)
        >>> theta = msr.controller_init(robot, jax.random.PRNGKey(0))
        >>> still = jax.tree_util.tree_map(lambda a: 0 * a, theta)  # no actuation
        >>> bool(-0.21 < float(loss(still)) < -0.19)  # the head starts at x = 0.2
        True
    """
    num_steps = check_int("num_steps", num_steps, minimum=2, maximum=INT32_MAX)
    s0 = initial_state(robot)
    return PolicyObjective(
        _STEPS[bool(toi)],
        controller,
        lambda key: s0,
        _no_cost,
        num_steps - 1,
        terminal_cost=partial(_minus_head_x, head=robot.head),
        params=robot,
        observe=observe,
        num_states=1,
    )


def _closed_loop(state: RobotState, params: tuple[Robot, Any], *, toi: bool) -> RobotState:
    robot, theta = params
    return step(state, robot, controller(observe(state), theta), toi=toi)


# module-level steps: diffsim.rollout compiles once per step function, not once per call
_CLOSED_LOOP = {False: partial(_closed_loop, toi=False), True: partial(_closed_loop, toi=True)}


def rollout(
    robot: Robot, theta: dict[str, Array], *, toi: bool = False, num_steps: int = NUM_STEPS
) -> tuple[Array, Array]:
    """Positions and velocities of every state under the controller θ (the dynamics
    :func:`objective` rolls out).

    Returns:
        ``(x, v)``, each (num_steps, n, 2): state 0 (the robot at rest) to state
        num_steps − 1.

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> robot = msr.Robot.builtin("A")
        >>> theta = msr.controller_init(robot, jax.random.PRNGKey(0))
        >>> x, v = msr.rollout(robot, theta, toi=True, num_steps=100)
        >>> x.shape, bool(x[:, :, 1].min() >= msr.GROUND_HEIGHT - 1e-6)  # TOI: on the ground
        ((100, 6, 2), True)
    """
    num_steps = check_int("num_steps", num_steps, minimum=2, maximum=INT32_MAX)
    states = _rollout(_CLOSED_LOOP[bool(toi)], initial_state(robot), (robot, theta), num_steps - 1)
    return states.x, states.v


def normalised_descent(step_size: float) -> optax.GradientTransformation:
    """Gradient descent with steps of fixed length: θ ← θ − s·g / (|g| + 10⁻⁶), |g| the
    norm of the whole gradient (DiffTaichi's update).

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.systems.mass_spring_robot import normalised_descent
        >>> opt = normalised_descent(0.2)
        >>> u, _ = opt.update(jnp.array([3.0, 4.0]), opt.init(jnp.zeros(2)))
        >>> [round(float(c), 6) for c in u]
        [-0.12, -0.16]
    """
    if not (isinstance(step_size, int | float) and math.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a finite number > 0, got {step_size!r}")

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(updates)))
        scale = -step_size / (norm + 1e-6)
        return jax.tree_util.tree_map(lambda g: scale * g, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def problem(
    robot: Robot,
    key: Array,
    *,
    toi: bool = False,
    num_steps: int = NUM_STEPS,
) -> tuple[PolicyObjective, dict[str, Array]]:
    """``(loss, θ₀)``: :func:`objective` and :func:`controller_init`'s θ from ``key`` —
    the pair :func:`diffsim.optimize` (or any estimator) takes.

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> loss, theta0 = msr.problem(msr.Robot.builtin("B"), jax.random.PRNGKey(0))
        >>> loss.horizon, theta0["w2"].shape
        (681, (30, 32))
    """
    return objective(robot, toi=toi, num_steps=num_steps), controller_init(robot, key)


def train(
    robot: Robot,
    key: Array,
    *,
    toi: bool = False,
    iterations: int = RECIPE.iterations,
    step_size: float = RECIPE.step_size,
    num_steps: int = NUM_STEPS,
) -> OptimizeResult:
    """DiffTaichi's recipe: θ from :func:`controller_init`, then ``iterations`` steps of
    :func:`normalised_descent` on the exact gradient, through :func:`diffsim.optimize`:

    ``optimize(loss, theta0, Exact(), steps=iterations, optimizer=normalised_descent(0.2))``
    with ``(loss, theta0) = problem(robot, key_init, toi=toi)``.

    ``result.history.loss[k]`` is the loss at iteration k before its update (DiffTaichi's
    printed ``Loss``); ``result.theta`` the controller after the last update, and
    ``result.loss`` its loss.

    Args:
        robot: the :class:`Robot`.
        key: PRNG key (split into the initial weights' key and ``optimize``'s).
        toi: ground contact at the time of impact (DiffTaichi's ``use_toi``).
        iterations: gradient steps (>= 1; DiffTaichi: 100).
        step_size: length of each step in θ (> 0; DiffTaichi: 0.2).
        num_steps: states per rollout (>= 2; DiffTaichi: 682).

    Example:
        >>> import jax
        >>> from diffsim.systems import mass_spring_robot as msr
        >>> r = msr.train(msr.Robot.builtin("A"), jax.random.PRNGKey(0), iterations=3,
        ...               num_steps=30)
        >>> r.history.loss.shape
        (3,)
    """
    check_key("key", key)
    iterations = check_int("iterations", iterations, minimum=1, maximum=INT32_MAX)
    k_init, k_opt = jax.random.split(key)
    loss, theta0 = problem(robot, k_init, toi=toi, num_steps=num_steps)
    return optimize(
        loss,
        theta0,
        Exact(),
        steps=iterations,
        key=k_opt,
        optimizer=normalised_descent(step_size),
    )
