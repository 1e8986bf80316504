"""Control tasks: the paper's policy and trajectory experiments, each with its recipe.

A :class:`Task` is a loss of a decision θ (open-loop forces, or a policy's parameters)
with the constants its experiment uses — the smoothing σ, the samples N, the optimiser and
the number of iterations — so that ``TASKS[name].train(key=...)`` trains it with the
default method (the doctor's evidence picks how to descend), ``TASKS[name].train("zeroth",
key=...)`` runs the paper's experiment with any estimator, and ``diffsim train --task
NAME`` runs either from the shell. :data:`TASKS` is the one registry the CLI, the
benchmarks and the tests read.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array

from ._checks import check_bool, check_int
from ._methods import METHODS
from ._optimize import OptimizeResult, optimize
from .estimators import ESTIMATORS, Estimator, Exact, make_estimator
from .systems import box_trajopt as bt
from .systems import mass_spring_robot as msr
from .systems import tennis

SMOOTHING = ("zeroth", "first", "alpha", "auto")
"""The smoothing estimators a task's recipe trains with (those that take its σ and N)."""

RECIPE_ESTIMATORS = (*SMOOTHING, "exact")
"""Every estimator a task's recipe trains with: the smoothing ones and the exact gradient
(DiffTaichi's recipe for its robots)."""

METHOD_NAMES = ("decide", "lbfgs")
"""The methods a task trains with that choose their gradient themselves
(:data:`diffsim.optimization.METHODS`)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One control task and the recipe its experiment trains with.

    Attributes:
        name: the registry key and the CLI's ``--task`` choice.
        title: a short description.
        expect: the paper's qualitative result on it, in words.
        build: ``() -> (loss, theta0)``: the loss of θ (for a policy task, a
            :class:`~diffsim.policies.PolicyObjective`, noise on every step's action) and where
            training starts.
        sigma: σ of the smoothing estimators (in θ's units, or the action's for a policy).
        num_samples: N, samples per gradient.
        steps: iterations of the experiment.
        learning_rate: a constant step of plain gradient descent (the paper's trajectory
            optimisations), or ``None`` for :func:`~diffsim.optimization.default_optimizer`.
        adam_rate: instead, Adam at this constant learning rate (``None``: not Adam).
        score: optional ``(loss, θ) -> number``, the task's own measure of success.
        score_name: what ``score`` measures.
        normalised_step: instead, normalised gradient descent, steps of this length in θ
            (DiffTaichi's recipe; ``None``: not it).
        recipe_estimator: the estimator the recipe uses where none is named (the CLI's
            ``--method recipe``): ``"auto"``, or the paper's or DiffTaichi's own.
        estimators: (class attribute) the estimators a task's recipe trains with: those
            that take its σ and N, and ``"exact"``.
        methods: (class attribute) the methods that choose their gradient themselves:
            ``"decide"`` (the default of :meth:`train`) and ``"lbfgs"``.

    Example:
        >>> from diffsim import TASKS, Task
        >>> t = TASKS["push-stiff"]
        >>> t.sigma, t.num_samples, t.steps, t.learning_rate
        (0.1, 10, 500, 0.001)
        >>> loss, u0 = t.build()
        >>> u0.shape, int(loss(u0))
        ((200,), 1821)
        >>> Task.estimators, Task.methods
        (('zeroth', 'first', 'alpha', 'auto', 'exact'), ('decide', 'lbfgs'))
    """

    estimators: ClassVar[tuple[str, ...]] = RECIPE_ESTIMATORS
    methods: ClassVar[tuple[str, ...]] = METHOD_NAMES

    name: str
    title: str
    expect: str
    build: Callable[[], tuple[Callable[[Any], Array], Any]]
    sigma: float
    num_samples: int
    steps: int
    learning_rate: float | None = None
    adam_rate: float | None = None
    score: Callable[[Any, Any], Array] | None = None
    score_name: str = ""
    normalised_step: float | None = None
    recipe_estimator: str = "auto"

    def estimator(self, name: str = "auto") -> Estimator:
        """The estimator registered as ``name`` with this task's σ and N.

        Example:
            >>> from diffsim import TASKS
            >>> TASKS["friction"].estimator("zeroth").num_samples
            10
        """
        if name not in self.estimators:
            known = ", ".join(n for n in ESTIMATORS if n in self.estimators)
            raise ValueError(f"estimator must be one of {known} for a task, got {name!r}")
        if name == "exact":
            return Exact()
        return make_estimator(name, sigma=self.sigma, num_samples=self.num_samples)

    def problem(self) -> tuple[Callable[[Any], Array], Any]:
        """``(loss, θ₀)`` of :attr:`build`, built once per task and kept: :meth:`train`
        and every caller get the same loss object, so :func:`~diffsim.optimize`'s compiled
        run (keyed by the loss) is reused instead of compiled again.

        Example:
            >>> from diffsim import TASKS
            >>> TASKS["friction"].problem()[0] is TASKS["friction"].problem()[0]
            True
        """
        return _problem(self)

    def optimizer(self) -> optax.GradientTransformation | None:
        """The recipe's optimiser: plain gradient descent at ``learning_rate``, Adam at
        ``adam_rate``, or ``None`` (:func:`~diffsim.optimize`'s default); one object per
        task (``optimize`` compiles for it: a new one would compile the run again).

        Example:
            >>> from diffsim import TASKS
            >>> TASKS["tennis"].optimizer() is None, TASKS["tennis"].optimizer_text()
            (True, "Adam (optimize's default)")
        """
        return _optimizer(self)

    def optimizer_text(self) -> str:
        """The optimiser in words (what the benchmark's table says)."""
        if self.learning_rate is not None:
            return f"gradient descent, step {self.learning_rate:g}"
        if self.normalised_step is not None:
            return f"normalised gradient descent, step {self.normalised_step:g}"
        if self.adam_rate is not None:
            return f"Adam, learning rate {self.adam_rate:g}"
        return "Adam (optimize's default)"

    def train(self, method: str | Estimator = "decide", *, key: Array,
              steps: int | None = None, callback: Callable[[Array], None] | None = None,
              budget: int | None = None) -> OptimizeResult:  # fmt: skip
        """Train θ from the task's start by :func:`diffsim.optimize`, for at most ``steps``
        iterations (default: the experiment's); ``callback`` and ``budget`` (simulator
        evaluations at most, within one step) as ``optimize``'s.

        ``method`` is one of :attr:`methods` — ``"decide"`` (the default: the doctor's
        evidence picks how to descend, L-BFGS on the exact gradient where it is trusted;
        a policy task's batch of initial states is the sample-average approximation,
        see :class:`~diffsim.Decide`) or ``"lbfgs"`` (the exact gradient with L-BFGS,
        trusted or not) — or the paper's recipe with an estimator: one of
        :attr:`estimators` (with this task's σ and N) or an
        :class:`~diffsim.estimators.Estimator`, the recipe's optimiser, σ held fixed.

        Example:
            >>> import jax
            >>> from diffsim import TASKS
            >>> t = TASKS["push-soft"]
            >>> r = t.train("first", key=jax.random.PRNGKey(0), steps=50)  # the recipe
            >>> loss, u0 = t.build()
            >>> bool(r.loss < 0.6 * loss(u0))  # the box is pushed most of the way
            True
            >>> d = t.train(key=jax.random.PRNGKey(0), steps=5)  # the default: decide
            >>> [x.method for x in d.decisions], int(d.steps_run)  # a smooth spring: L-BFGS
            (['lbfgs'], 5)
        """
        steps = self.steps if steps is None else check_int("steps", steps, minimum=1)
        (loss, theta0), opt = self.problem(), self.optimizer()
        if isinstance(method, str) and method in self.methods:
            return optimize(loss, theta0, steps=steps, key=key, callback=callback,
                            budget=budget, **METHODS[method].options(None))  # fmt: skip
        if isinstance(method, str) and method not in self.estimators:
            known = ", ".join((*self.methods, *self.estimators))
            raise ValueError(f"method must be one of {known} or an Estimator, got {method!r}")
        est = self.estimator(method) if isinstance(method, str) else method
        return optimize(loss, theta0, est, steps=steps, key=key, optimizer=opt,
                        sigma_anneal=None, callback=callback, budget=budget)  # fmt: skip


@functools.cache
def _problem(task: Task) -> tuple[Callable[[Any], Array], Any]:
    # built eagerly, even under a trace, so that nothing kept is a tracer
    with jax.ensure_compile_time_eval():
        return task.build()


@functools.cache
def _optimizer(task: Task) -> optax.GradientTransformation | None:
    if task.learning_rate is not None:
        return optax.sgd(task.learning_rate)
    if task.adam_rate is not None:
        return optax.adam(task.adam_rate)
    if task.normalised_step is not None:
        return msr.normalised_descent(task.normalised_step)
    return None


def _push_task(name: str, kind: str, task: bt.SpringPush, expect: str) -> Task:
    """A pushing task through a spring: the paper's trajectory optimisation and recipe."""

    def build():
        return (lambda u: bt.spring_push_loss(u, task)), bt.initial_forces(task)

    return Task(
        name,
        f"push a box through a {kind} spring (k = {task.k:g} N/m, T = {task.num_steps}): "
        "the pusher's force on each of T steps (N), from 0.1 N on each",
        expect,
        build,
        sigma=0.1,  # the paper's recipe (its code): σ on each u_t, N, iterations, step
        num_samples=10,
        steps=500,
        learning_rate=1e-3,
    )


def _friction() -> tuple[Callable[[Any], Array], Array]:
    return bt.friction_carry_loss, bt.initial_forces()


TENNIS_HELD_OUT = 123
"""Seed of the held-out initial states a tennis policy is scored on."""


def _tennis() -> tuple[Callable[[Any], Array], Array]:
    return tennis.objective(num_states=64), jnp.zeros((3, 7), jnp.result_type(float))


def _returned(objective: Any, theta: Any) -> Array:
    return tennis.returned(objective, theta, jax.random.PRNGKey(TENNIS_HELD_OUT))


def _reacher_open() -> tuple[Callable[[Any], Array], Array]:
    from .engines import control

    loss = control.reacher_open_loop()
    return loss, jnp.zeros((control.REACHER_HORIZON, 2), jnp.result_type(float))


def _pendulum() -> tuple[Callable[[Any], Array], Array]:
    from .engines import control

    return control.pendulum_objective(), jnp.zeros((1, 5), jnp.result_type(float))


def _balanced(objective: Any, theta: Any) -> Array:
    from .engines import control

    return control.balanced(objective, theta)


def robot_task(robot: str | os.PathLike[str] | msr.Robot = "A", *, toi: bool = True) -> Task:
    """DiffTaichi's mass-spring robot walking right as a :class:`Task`: a built-in robot
    (``"A"``–``"D"``), a robot file (JSON, :meth:`~diffsim.systems.mass_spring_robot.Robot.
    from_json`) or a :class:`~diffsim.systems.mass_spring_robot.Robot`; with or without
    time of impact at the ground. DiffTaichi's recipe: the exact gradient, 100 steps of
    normalised gradient descent of length 0.2, its controller's initial weights from
    ``PRNGKey(0)``.

    Example:
        >>> from diffsim import robot_task
        >>> t = robot_task("B", toi=False)
        >>> t.name, t.steps, t.optimizer_text()
        ('mass-spring-robot', 100, 'normalised gradient descent, step 0.2')
    """
    # a built-in robot is built when the task is first trained, not at import: building
    # arrays would start JAX's backend before a user can choose its devices
    if isinstance(robot, msr.Robot):
        given = robot
        make, what = (lambda: given), "a given robot"
    elif isinstance(robot, str) and robot in msr.ROBOTS:
        make, what = functools.partial(msr.Robot.builtin, robot), f"DiffTaichi's robot {robot}"
    elif isinstance(robot, str | os.PathLike) and os.path.splitext(robot)[1] == ".json":
        body = msr.Robot.from_json(robot)  # checked now: a bad file is named at once
        make, what = (lambda: body), f"the robot in {os.fspath(robot)}"
    else:
        raise ValueError(
            f"robot must be one of {', '.join(msr.ROBOTS)}, a robot file (.json) or a Robot, "
            f"got {robot!r}"
        )
    check_bool("toi", toi)

    def build():
        return msr.problem(make(), jax.random.PRNGKey(0), toi=toi)

    return Task(
        "mass-spring-robot",
        f"DiffTaichi's mass-spring robot walking right ({what}, "
        f"{'with' if toi else 'without'} time of impact at the ground): a 10-sine, "
        "32-tanh controller's weights, loss −x of the head after 681 steps",
        "DiffTaichi: the robot learns to walk; without time of impact its gradients are "
        "worse and it walks less far",
        build,
        sigma=0.05,  # in the action's units (each spring's actuation, in [-1, 1])
        num_samples=8,
        steps=msr.RECIPE.iterations,
        normalised_step=msr.RECIPE.step_size,
        recipe_estimator="exact",
    )


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        _push_task("push-soft", "soft", bt.SOFT, "first-order trains fastest; zeroth-order lags"),
        _push_task(
            "push-stiff",
            "stiff",
            bt.STIFF,
            "zeroth-order trains fastest; first-order is slow and erratic",
        ),
        Task(
            "friction",
            "carry a box by friction (T = 400): the pusher's force on each step, from 0",
            "first-order descends, then degrades once the box slides off; zeroth- and "
            "alpha-order keep descending",
            _friction,
            sigma=0.1,  # the paper's recipe, as for pushing but 100 iterations of 1e-4
            num_samples=10,
            steps=100,
            learning_rate=1e-4,
        ),
        Task(
            "tennis",
            "return a ball with a paddle: a linear policy Θ ∈ R^{3×7} over 200 steps",
            "the paper: zeroth- and alpha-order return the balls, first-order misses many "
            "(measured here: first-order returns the most, docs/guides/control.md)",
            _tennis,
            sigma=0.05,
            num_samples=200,
            steps=300,
            score=_returned,
            score_name="held-out balls returned",
        ),
        Task(
            "reacher-open",
            "gymnasium's reacher (MuJoCo, through MJX): the two motors' controls on each of "
            "100 steps, to one target",
            "smooth but for the elbow's limit and the motors' saturation: first-order "
            "descends (measured 14.9 to 11.6); zeroth- and alpha-order climb, their noise "
            "over 200 controls dominating at N = 8",
            _reacher_open,
            sigma=0.1,
            num_samples=8,
            steps=100,
            adam_rate=0.05,
        ),
        Task(
            "pendulum",
            "gymnasium's inverted pendulum (MuJoCo, through MJX): a linear policy "
            "Θ ∈ R^{1×5} balances the pole from random tilts over 100 steps",
            "smooth while the pole stays up: first-order trains best (measured: it "
            "balances every held-out pole, zeroth-order 29 %); a fallen pole rests on its "
            "hinge's limit, a plateau of the cost",
            _pendulum,
            sigma=0.3,
            num_samples=16,
            steps=100,
            adam_rate=0.3,
            score=_balanced,
            score_name="held-out poles balanced",
        ),
        robot_task("A"),
    )
}
"""Every control task by name, in the order the CLI lists them."""
