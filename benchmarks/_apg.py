"""Brax APG (analytic policy gradient) on diffsim's pendulum task, for ``benchmarks.control``.

:class:`PendulumEnv` is the task :func:`diffsim.engines.control.pendulum_objective` poses,
as a Brax ``PipelineEnv`` on the ``mjx`` backend: the same MJCF file (gymnasium's
``inverted_pendulum.xml``, its RK4 and h = 0.02 s), the same observation (x, φ, ẋ, φ̇, 1)
and initial-state distribution (the objective's own ``observe`` and ``initial_state``), the
reward minus the objective's own per-step cost of the state *before* the step and its control
(so an episode's return is minus diffsim's V), episodes of ``PENDULUM_HORIZON`` steps. The
control is ``ctrl = ACTION_SCALE · action``: APG's policy ends in a tanh (Brax's
``NormalTanhDistribution``), so its action in [−1, 1] is mapped onto the motor's ``ctrlrange``
±3 as Brax's own envs do; MuJoCo clamps ``ctrl`` to ±3 either way, and the cost charges the
control given, as diffsim's does.

One setting differs from diffsim's adapter, forced by reverse mode: MJX's constraint solver
is a ``lax.while_loop`` (to ``opt.tolerance``, at most ``opt.iterations = 100``), which
``jax.grad`` cannot differentiate, so the env's model runs ``opt.iterations = 1`` (MJX then
calls one Newton iteration, its line search a ``scan``) — where the hinge's or the slider's
limit is active the solve is one Newton step, not converged; with no limit active the values
are the same (the pendulum's only constraints are those two limits).

:func:`train_apg` runs ``brax.training.agents.apg.train.train`` with Brax's defaults but for
what the task forces; the trained policy (its deterministic mode, ``ACTION_SCALE · tanh``) is
then scored by diffsim's own rollout (:class:`~diffsim.policies.PolicyObjective`, the adapter's
converged solve) on the objective's 16 fixed initial states and on
:func:`~diffsim.engines.control.balanced`'s 100 held-out ones — the numbers every other row of
the table reports.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import shutil
import tempfile
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from diffsim import TASKS
from diffsim.engines import control
from diffsim.policies import PolicyObjective

ACTION_SCALE = 3.0
"""``ctrl = ACTION_SCALE · action``: the motor's ``ctrlrange`` is ±3."""
NUM_ENVS = 16
"""Parallel environments of APG (FoBG's N = 16 rollouts an iteration)."""
HORIZON_LENGTH = 32
"""Steps a gradient of APG differentiates through (Brax's default ``horizon_length``)."""
NUM_EVAL_ENVS = 1
"""Brax's own evaluation after training (unused here: diffsim scores the policy), kept tiny."""
FOBG_STEPS = 160_000
"""FoBG's simulator steps in ``docs/records/control-mujoco.txt``: 1600 rollouts × 100."""


def _objective() -> PolicyObjective:
    loss, _ = TASKS["pendulum"].problem()
    assert isinstance(loss, PolicyObjective)
    return loss


def _mj_model(iterations: int = 1) -> Any:
    import mujoco

    m = mujoco.MjModel.from_xml_path(control.gymnasium_model("inverted_pendulum"))
    m.opt.iterations = iterations  # see the module docstring: reverse mode needs 1
    return m


def _env_class():
    from brax.envs.base import PipelineEnv, State
    from brax.io import mjcf

    class PendulumEnv(PipelineEnv):
        """diffsim's pendulum task as a Brax env (see the module docstring)."""

        def __init__(self, action_scale: float = ACTION_SCALE, iterations: int = 1):
            import warnings

            with warnings.catch_warnings():  # brax warns that mjx systems are experimental
                warnings.simplefilter("ignore")
                sys = mjcf.load_model(_mj_model(iterations))
            super().__init__(sys=sys, backend="mjx", n_frames=1)
            self._objective = _objective()
            self._scale = action_scale

        def reset(self, rng: jax.Array) -> State:
            s0 = self._objective.initial_state(rng)  # diffsim's sampler of x₁
            ps = self.pipeline_init(s0.qpos, s0.qvel)
            zero = jnp.zeros((), ps.qpos.dtype)
            return State(ps, self._objective.observe(ps), zero, zero)

        def step(self, state: State, action: jax.Array) -> State:
            u = self._scale * action
            reward = -self._objective.cost(state.pipeline_state, u)  # c(x_h, u_h)
            ps = self.pipeline_step(state.pipeline_state, u)
            return state.replace(pipeline_state=ps, obs=self._objective.observe(ps), reward=reward)

        @property
        def action_size(self) -> int:
            return 1

    return PendulumEnv


@functools.cache
def make_env(action_scale: float = ACTION_SCALE, iterations: int = 1) -> Any:
    """The Brax env of diffsim's pendulum task (``brax`` and ``mujoco-mjx`` needed)."""
    return _env_class()(action_scale, iterations)


TENNIS_ACTION_SCALE = 2.0
"""Tennis: ``u = TENNIS_ACTION_SCALE · action`` (APG's policy ends in a tanh): paddle speeds up
to 2 m/s and 2 rad/s, about 2.5× the largest command of FoBG's trained policy (seed 0, the
task's recipe) over 200 held-out balls (0.79 m/s; 0.49, 0.79, 0.28 per component)."""


def _objective_env_class():
    from brax.envs.base import Env, State

    class ObjectiveEnv(Env):
        """A diffsim task whose step is plain JAX (tennis), as a Brax ``Env``: the state is
        ``(x, k)`` (k the step within the episode), ``reset`` draws the objective's x₁,
        ``step`` is the objective's step with ``u = scale · action``, the reward minus its
        per-step cost of the state before the step and that ``u``, minus the terminal cost
        on the episode's last step (so an episode's return is minus diffsim's V)."""

        def __init__(self, task: str, action_scale: float):
            self._obj = TASKS[task].problem()[0]
            self._scale = action_scale
            x0 = self._obj.initial_state(jax.random.PRNGKey(0))
            self._obs_size = int(np.size(self._observe(x0)))
            theta0 = TASKS[task].problem()[1]
            self._act_size = int(np.prod(self._obj.check(theta0)))

        def _observe(self, x):
            return x if self._obj.observe is None else self._obj.observe(x)

        def reset(self, rng: jax.Array) -> State:
            x = self._obj.initial_state(rng)
            zero = jnp.zeros((), x.dtype)
            return State((x, jnp.zeros((), jnp.int32)), self._observe(x), zero, zero)

        def step(self, state: State, action: jax.Array) -> State:
            x, k = state.pipeline_state
            u = self._scale * action
            x1, k1 = self._obj.step(x, self._obj.params, u), k + 1
            reward = -self._obj.cost(x, u)
            if self._obj.terminal_cost is not None:
                last = k1 == self._obj.horizon
                reward = reward - jnp.where(last, self._obj.terminal_cost(x1), 0.0)
            return state.replace(pipeline_state=(x1, k1), obs=self._observe(x1), reward=reward)

        @property
        def observation_size(self) -> int:
            return self._obs_size

        @property
        def action_size(self) -> int:
            return self._act_size

        @property
        def backend(self) -> str:
            return "diffsim"

    return ObjectiveEnv


@functools.cache
def make_objective_env(task: str, action_scale: float) -> Any:
    """The Brax env of a diffsim task whose step is plain JAX (tennis; ``brax`` needed)."""
    return _objective_env_class()(task, action_scale)


class APGResult(NamedTuple):
    loss: float
    """diffsim's noise-free mean cost over the objective's 16 fixed initial states."""
    score: float
    """The fraction of the 100 held-out poles balanced (:func:`control.balanced`)."""
    steps: int
    """Simulator steps APG trained on (updates × envs × horizon_length)."""
    compile_s: float
    """Seconds of ``train`` outside Brax's training loop (tracing and compiling the reset,
    the first step and Brax's evaluator, and its one small evaluation)."""
    run_s: float
    """Brax's ``training/walltime``: its training loop, with the loop's tracing and
    compilation (or, with a persistent cache, loading) on every call."""
    total_s: float
    """Wall time of the whole call, scoring excluded."""


def _replicated(x: Any, devices: Any) -> Any:
    """``jax.device_put_replicated`` (removed from JAX 0.10, which Brax 0.14.2's APG still
    calls): ``x`` stacked once per device on a new leading axis."""
    n = len(devices)
    return jax.device_put(jax.tree.map(lambda a: jnp.stack([jnp.asarray(a)] * n), x), devices[0])


def _brax_apg() -> Any:
    from brax.training.agents.apg import train as apg

    if not hasattr(jax, "device_put_replicated"):
        jax.device_put_replicated = _replicated  # type: ignore[attr-defined]
    return apg


def _network_factory(linear: bool):
    from brax.training.agents.apg import networks as apg_networks

    if linear:
        return functools.partial(apg_networks.make_apg_networks, hidden_layer_sizes=())
    return apg_networks.make_apg_networks


def diffsim_policy(make_policy, params, action_scale: float = ACTION_SCALE):
    """APG's deterministic policy as diffsim's ``policy(obs, θ) -> u`` (θ: Brax's params)."""
    key = jax.random.PRNGKey(0)  # unused by the deterministic mode

    def policy(obs, theta):
        return action_scale * make_policy(theta, deterministic=True)(obs, key)[0]

    return policy


def score(make_policy, params, task: str = "pendulum",
          action_scale: float = ACTION_SCALE) -> tuple[float, float]:  # fmt: skip
    """(loss, held-out score) of APG's policy by diffsim's own rollout: the task's
    objective with APG's deterministic policy, and the task's score (pendulum: poles
    balanced; tennis: balls returned)."""
    spec = TASKS[task]
    loss = spec.problem()[0]
    assert isinstance(loss, PolicyObjective) and spec.score is not None
    obj = dataclasses.replace(loss, policy=diffsim_policy(make_policy, params, action_scale))
    value = float(jax.jit(lambda p: obj(p))(params))
    frac = float(jax.jit(lambda p: spec.score(obj, p))(params))  # type: ignore[misc]
    return value, frac


def train_apg(seed: int, steps: int = FOBG_STEPS, *, linear: bool = False,
              num_envs: int = NUM_ENVS, task: str = "pendulum",
              horizon_length: int = HORIZON_LENGTH) -> APGResult:  # fmt: skip
    """Brax APG on the task's env (pendulum: :class:`PendulumEnv` on Brax's MJX pipeline;
    tennis: :func:`make_objective_env`) for ``steps`` simulator steps (rounded down to
    whole updates of ``num_envs × horizon_length``), Brax's defaults otherwise; scored by
    diffsim (see the module docstring)."""
    apg = _brax_apg()
    updates = steps // (num_envs * horizon_length)
    if updates < 1:
        raise ValueError(f"steps must be >= {num_envs * horizon_length}, got {steps}")
    walltime: list[float] = []

    def progress(_, metrics):
        if "training/walltime" in metrics:
            walltime.append(float(metrics["training/walltime"]))

    t = time.perf_counter()
    if task == "pendulum":
        env, scale = make_env(), ACTION_SCALE
    else:
        env, scale = make_objective_env(task, TENNIS_ACTION_SCALE), TENNIS_ACTION_SCALE
    horizon = TASKS[task].problem()[0].horizon
    make_policy, params, _ = apg.train(
        env,
        episode_length=horizon,
        policy_updates=updates,
        horizon_length=horizon_length,
        num_envs=num_envs,
        num_evals=1,
        num_eval_envs=NUM_EVAL_ENVS,
        use_float64=bool(jax.config.jax_enable_x64),
        seed=seed,
        network_factory=_network_factory(linear),
        progress_fn=progress,
    )
    jax.block_until_ready(params)
    total = time.perf_counter() - t
    run_s = walltime[-1] if walltime else float("nan")
    loss, frac = score(make_policy, params, task, scale)
    return APGResult(loss, frac, updates * num_envs * horizon_length, total - run_s, run_s, total)


def rows(seeds: int, steps: int = FOBG_STEPS, row=None, task: str = "pendulum",
         num_envs: int = NUM_ENVS) -> list[str]:  # fmt: skip
    """The table's "Brax APG" and "Brax APG (linear)" rows (``row``: the table's
    formatter ``(label, costs, fracs, evals, times) -> str``)."""
    horizon = TASKS[task].problem()[0].horizon
    if not jax.config.jax_compilation_cache_dir:
        # Brax's train jits fresh closures on every call: without a persistent cache every
        # seed compiles again; with it the seeds after the first load the programs
        cache = tempfile.mkdtemp(prefix="apg-jax-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)  # removed when the run ends
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    out = []
    variants = [("Brax APG", False, HORIZON_LENGTH), ("Brax APG (linear)", True, HORIZON_LENGTH)]
    if task != "pendulum":  # the whole episode in one window, as FoBG differentiates it
        variants.append((f"Brax APG (H={horizon})", False, horizon))
    for label, linear, window in variants:
        results = [train_apg(seed, steps, linear=linear, num_envs=num_envs, task=task,
                             horizon_length=window) for seed in range(seeds)]  # fmt: skip
        times = [r.total_s for r in results]
        loop = [r.run_s for r in results[1:]] or [results[0].run_s]  # as run s: later seeds
        out.append(
            row(
                label,
                [r.loss for r in results],
                [r.score for r in results],
                [r.steps // horizon for r in results],
                times,
            )
            + f"  {results[0].steps} steps, Brax loop {np.median(loop):.1f} s"
        )
        print(out[-1], flush=True)
    return out
