"""DiffTaichi's mass-spring robot (``examples/mass_spring.py``) on taichi 1.7, for
``benchmarks.difftaichi``.

No ``from __future__ import annotations`` here: Taichi reads kernel annotations as types.

DiffTaichi's kernels ported to the current taichi API (``ti.field`` with ``needs_grad``,
``ti.ad.Tape``), same constants: five kernel launches per step from Python (the centre, the
two layers of the controller, the springs' impulses, the advance with or without time of
impact at the ground), the loss −x of the head after 681 steps, and DiffTaichi's update
θ ← θ − 0.2 g / (|g| + 10⁻⁶). The robot (points and springs, DiffTaichi's config format)
and the controller's initial weights come in an ``.npz`` file, so that both sides of the
benchmark start from the same θ; the weights' initialisation itself is not ported.

Run in its own process (taichi's fields are global to a process and sized by the robot):

    python -m benchmarks._taichi_mass_spring FILE.npz --iterations 100 [--no-toi]

``FILE.npz`` holds ``points`` (n, 2), ``springs`` (m, 5) and ``w1``, ``b1``, ``w2``, ``b2``;
prints one JSON object: ``losses`` (the loss at each iteration before its update),
``seconds`` (each iteration's wall time: clear, forward, backward and update).
"""

import argparse
import json
import math
import time

import numpy as np
import taichi as ti

DT = 0.004
STEPS = 2048 // 3  # states 0 ... 681
GROUND_HEIGHT = 0.1
GRAVITY = -4.8
DAMPING = 15.0
SPRING_OMEGA = 10.0
N_SIN_WAVES = 10
N_HIDDEN = 32
GOAL = (0.9, 0.2)
HEAD = 0
STEP_SIZE = 0.2  # DiffTaichi's gradient_clip: the length of every step in θ

n_objects = n_springs = 0
# fields, made by setup() after ti.init (kernels compile on first call and read them then)
x = v = v_inc = center = hidden = act = loss = goal = None
weights1 = bias1 = weights2 = bias2 = None
spring_a = spring_b = spring_length = spring_stiffness = spring_actuation = None
np_real = np.float32


def n_inputs() -> int:
    return N_SIN_WAVES + 4 * n_objects + 2


def setup(points: np.ndarray, springs: np.ndarray, threads: int = 0, f64: bool = False) -> None:
    """ti.init on the CPU in float32 and the fields for this robot (DiffTaichi's layout)."""
    global n_objects, n_springs, x, v, v_inc, center, hidden, act, loss, goal
    global weights1, bias1, weights2, bias2
    global spring_a, spring_b, spring_length, spring_stiffness, spring_actuation, np_real
    options = {"cpu_max_num_threads": threads} if threads else {}
    real = ti.f64 if f64 else ti.f32
    np_real = np.float64 if f64 else np.float32
    ti.init(arch=ti.cpu, default_fp=real, random_seed=0, log_level=ti.ERROR, **options)
    n_objects, n_springs = len(points), len(springs)
    vec = lambda shape: ti.Vector.field(2, real, shape=shape, needs_grad=True)  # noqa: E731
    scalar = lambda shape: ti.field(real, shape=shape, needs_grad=True)  # noqa: E731
    x, v, v_inc = vec((STEPS, n_objects)), vec((STEPS, n_objects)), vec((STEPS, n_objects))
    center = vec(STEPS)
    hidden, act = scalar((STEPS, N_HIDDEN)), scalar((STEPS, n_springs))
    weights1, bias1 = scalar((N_HIDDEN, n_inputs())), scalar(N_HIDDEN)
    weights2, bias2 = scalar((n_springs, N_HIDDEN)), scalar(n_springs)
    loss = scalar(())
    goal = ti.Vector.field(2, real, shape=())
    spring_a, spring_b = ti.field(ti.i32, n_springs), ti.field(ti.i32, n_springs)
    spring_length, spring_stiffness, spring_actuation = (ti.field(real, n_springs) for _ in "abc")
    springs = np.asarray(springs, np.float64)
    spring_a.from_numpy(springs[:, 0].astype(np.int32))
    spring_b.from_numpy(springs[:, 1].astype(np.int32))
    spring_length.from_numpy(springs[:, 2].astype(np_real))
    spring_stiffness.from_numpy(springs[:, 3].astype(np_real))
    spring_actuation.from_numpy(springs[:, 4].astype(np_real))
    start = np.zeros((STEPS, n_objects, 2), np_real)
    start[0] = points
    x.from_numpy(start)
    goal[None] = list(GOAL)


@ti.kernel
def compute_center(t: ti.i32):
    for _ in range(1):
        c = ti.Vector([0.0, 0.0])
        for i in ti.static(range(n_objects)):
            c += x[t, i]
        center[t] = (1.0 / n_objects) * c


@ti.kernel
def nn1(t: ti.i32):
    for i in range(N_HIDDEN):
        actuation = 0.0
        for j in ti.static(range(N_SIN_WAVES)):
            actuation += weights1[i, j] * ti.sin(
                SPRING_OMEGA * t * DT + 2 * math.pi / N_SIN_WAVES * j
            )
        for j in ti.static(range(n_objects)):
            offset = x[t, j] - center[t]
            # DiffTaichi: "a smaller weight since there are too many of them"
            actuation += weights1[i, j * 4 + N_SIN_WAVES] * offset[0] * 0.05
            actuation += weights1[i, j * 4 + N_SIN_WAVES + 1] * offset[1] * 0.05
            actuation += weights1[i, j * 4 + N_SIN_WAVES + 2] * v[t, j][0] * 0.05
            actuation += weights1[i, j * 4 + N_SIN_WAVES + 3] * v[t, j][1] * 0.05
        actuation += weights1[i, n_objects * 4 + N_SIN_WAVES] * (goal[None][0] - center[t][0])
        actuation += weights1[i, n_objects * 4 + N_SIN_WAVES + 1] * (goal[None][1] - center[t][1])
        actuation += bias1[i]
        hidden[t, i] = ti.tanh(actuation)


@ti.kernel
def nn2(t: ti.i32):
    for i in range(n_springs):
        actuation = 0.0
        for j in ti.static(range(N_HIDDEN)):
            actuation += weights2[i, j] * hidden[t, j]
        actuation += bias2[i]
        act[t, i] = ti.tanh(actuation)


@ti.kernel
def apply_spring_force(t: ti.i32):
    for i in range(n_springs):
        a = spring_a[i]
        b = spring_b[i]
        dist = x[t, a] - x[t, b]
        length = dist.norm() + 1e-4
        target_length = spring_length[i] * (1.0 + spring_actuation[i] * act[t, i])
        impulse = DT * (length - target_length) * spring_stiffness[i] / length * dist
        ti.atomic_add(v_inc[t + 1, a], -impulse)
        ti.atomic_add(v_inc[t + 1, b], impulse)


@ti.kernel
def advance_toi(t: ti.i32):
    for i in range(n_objects):
        s = ti.exp(-DT * DAMPING)
        old_v = s * v[t - 1, i] + DT * GRAVITY * ti.Vector([0.0, 1.0]) + v_inc[t, i]
        old_x = x[t - 1, i]
        new_x = old_x + DT * old_v
        toi = 0.0
        new_v = old_v
        if new_x[1] < GROUND_HEIGHT and old_v[1] < -1e-4:
            toi = -(old_x[1] - GROUND_HEIGHT) / old_v[1]
            new_v = ti.Vector([0.0, 0.0])
        new_x = old_x + toi * old_v + (DT - toi) * new_v
        v[t, i] = new_v
        x[t, i] = new_x


@ti.kernel
def advance_no_toi(t: ti.i32):
    for i in range(n_objects):
        s = ti.exp(-DT * DAMPING)
        old_v = s * v[t - 1, i] + DT * GRAVITY * ti.Vector([0.0, 1.0]) + v_inc[t, i]
        old_x = x[t - 1, i]
        new_v = old_v
        depth = old_x[1] - GROUND_HEIGHT
        if depth < 0 and new_v[1] < 0:
            new_v = ti.Vector([0.0, 0.0])  # the ground's friction: a full stop
        v[t, i] = new_v
        x[t, i] = old_x + DT * new_v


@ti.kernel
def compute_loss(t: ti.i32):
    loss[None] = -x[t, HEAD][0]


@ti.kernel
def clear_states():
    for t, i in ti.ndrange(STEPS, n_objects):
        v_inc[t, i] = ti.Vector([0.0, 0.0])


def forward(use_toi: bool) -> None:
    for t in range(1, STEPS):
        compute_center(t - 1)
        nn1(t - 1)
        nn2(t - 1)
        apply_spring_force(t - 1)
        if use_toi:
            advance_toi(t)
        else:
            advance_no_toi(t)
    loss[None] = 0
    compute_loss(STEPS - 1)


_PARAMS = ("w1", "b1", "w2", "b2")


def _fields() -> dict:
    return dict(zip(_PARAMS, (weights1, bias1, weights2, bias2)))


def train(use_toi: bool, iterations: int, theta: dict) -> dict:
    """DiffTaichi's ``optimize`` from the weights ``theta`` (its normalised update)."""
    for name, field in _fields().items():
        field.from_numpy(np.asarray(theta[name], np.float32))
    losses, seconds = [], []
    for _ in range(iterations):
        start = time.perf_counter()
        clear_states()
        with ti.ad.Tape(loss=loss):
            forward(use_toi)
        grads = {k: f.grad.to_numpy().astype(np.float64) for k, f in _fields().items()}
        scale = STEP_SIZE / (math.sqrt(sum(float(np.sum(g * g)) for g in grads.values())) + 1e-6)
        for k, f in _fields().items():
            f.from_numpy((f.to_numpy() - scale * grads[k]).astype(np_real))
        seconds.append(time.perf_counter() - start)
        losses.append(float(loss[None]))
    return {"losses": losses, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", help=".npz with points, springs, w1, b1, w2, b2")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--no-toi", action="store_true")
    parser.add_argument("--f64", action="store_true", help="float64 (a check; DiffTaichi: f32)")
    parser.add_argument("--threads", type=int, default=0, help="taichi's CPU threads (0: all)")
    args = parser.parse_args()
    data = np.load(args.robot)
    setup(data["points"], data["springs"], args.threads, args.f64)
    out = train(not args.no_toi, args.iterations, {k: data[k] for k in _PARAMS})
    out["taichi"] = ".".join(str(n) for n in ti.__version__)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
