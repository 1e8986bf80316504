"""DiffTaichi's billiards (``examples/billiards.py``) on taichi 1.7, for ``benchmarks.difftaichi``.

No ``from __future__ import annotations`` here: Taichi reads kernel annotations as types.

DiffTaichi's kernels ported to the current taichi API (``ti.field``/``ti.Vector.field``
with ``needs_grad``, ``ti.ad.Tape``), same constants, same step: every pair that overlaps at
the end of the free step and approaches gets the impulse −(1 + e)·½·v_n n on each ball,
and, with ``toi``, the position term ``x_inc = min(τ − h, 0)·impulse`` with τ DiffTaichi's
linearised time of impact (the end-of-step gap over the normal speed); without ``toi`` the
``x_inc`` term is dropped (diffsim's ``billiards_step(toi=False)``). One kernel launch per
step for the collisions and one for the advance, from Python, as DiffTaichi does; the tape
replays them backwards. The cue's x and v descend by plain gradient descent, lr 0.01.

Run in its own process (taichi's fields are global to a process):

    python -m benchmarks._taichi_billiards --iterations 200 [--no-toi]

prints one JSON object: ``losses`` (the loss at each iteration before its update),
``seconds`` (each iteration's wall time: clear, forward, backward and update),
``grad0`` (the gradient at the start, ``{"x": [..], "v": [..]}``) and ``final`` (θ).
"""

import argparse
import json
import time

import taichi as ti

RADIUS = 0.03
ELASTICITY = 0.8
DT = 0.003
STEPS = 1024  # states x_0 ... x_1023
LAYERS = 4
N_BALLS = 1 + (1 + LAYERS) * LAYERS // 2
TARGET = N_BALLS - 1
GOAL = (0.9, 0.75)
LEARNING_RATE = 0.01
CUE_X0 = (0.1, 0.5)
CUE_V0 = (0.3, 0.0)

# fields, made by setup() after ti.init (kernels compile on first call and read them then)
x = v = x_inc = impulse = init_x = init_v = loss = None


def setup(threads: int = 0, f64: bool = False) -> None:
    """ti.init on the CPU in float32 and the fields (DiffTaichi's layout, STEPS states)."""
    global x, v, x_inc, impulse, init_x, init_v, loss
    options = {"cpu_max_num_threads": threads} if threads else {}
    real = ti.f64 if f64 else ti.f32
    ti.init(arch=ti.cpu, default_fp=real, random_seed=0, log_level=ti.ERROR, **options)
    x, v, x_inc, impulse = (
        ti.Vector.field(2, real, shape=(STEPS, N_BALLS), needs_grad=True) for _ in range(4)
    )
    init_x, init_v = (ti.Vector.field(2, real, shape=(), needs_grad=True) for _ in range(2))
    loss = ti.field(real, shape=(), needs_grad=True)


@ti.func
def collide_pair(t, i, j, use_toi):
    imp = ti.Vector([0.0, 0.0])
    x_inc_contrib = ti.Vector([0.0, 0.0])
    if i != j:
        dist = (x[t, i] + DT * v[t, i]) - (x[t, j] + DT * v[t, j])
        dist_norm = dist.norm()
        rela_v = v[t, i] - v[t, j]
        if dist_norm < 2 * RADIUS:
            direction = dist.normalized()
            projected_v = direction.dot(rela_v)
            if projected_v < 0:
                imp = -(1 + ELASTICITY) * 0.5 * projected_v * direction
                toi = (dist_norm - 2 * RADIUS) / ti.min(-1e-3, projected_v)
                x_inc_contrib = ti.min(toi - DT, 0.0) * imp
    x_inc[t + 1, i] += use_toi * x_inc_contrib
    impulse[t + 1, i] += imp


@ti.kernel
def collide(t: ti.i32, use_toi: ti.f32):
    for i in range(N_BALLS):
        for j in range(i):
            collide_pair(t, i, j, use_toi)
    for i in range(N_BALLS):
        for j in range(i + 1, N_BALLS):
            collide_pair(t, i, j, use_toi)


@ti.kernel
def advance(t: ti.i32):
    for i in range(N_BALLS):
        v[t, i] = v[t - 1, i] + impulse[t, i]
        x[t, i] = x[t - 1, i] + DT * v[t, i] + x_inc[t, i]


@ti.kernel
def compute_loss(t: ti.i32):
    loss[None] = (x[t, TARGET][0] - GOAL[0]) ** 2 + (x[t, TARGET][1] - GOAL[1]) ** 2


@ti.kernel
def initialize():
    x[0, 0] = init_x[None]
    v[0, 0] = init_v[None]
    # the triangle, row i = 0..3, ball j = 0..i (DiffTaichi sets it from Python each forward)
    for i in ti.static(range(LAYERS)):
        for j in ti.static(range(i + 1)):
            k = i * (i + 1) // 2 + j + 1
            x[0, k] = ti.Vector([i * 2 * RADIUS + 0.5, j * 2 * RADIUS + 0.5 - i * RADIUS * 0.7])
            v[0, k] = ti.Vector([0.0, 0.0])


@ti.kernel
def clear():
    for t, i in ti.ndrange(STEPS, N_BALLS):
        impulse[t, i] = ti.Vector([0.0, 0.0])
        x_inc[t, i] = ti.Vector([0.0, 0.0])


@ti.kernel
def descend(lr: ti.f32):
    init_x[None] -= lr * init_x.grad[None]
    init_v[None] -= lr * init_v.grad[None]


def forward(use_toi: bool) -> None:
    initialize()
    for t in range(1, STEPS):
        collide(t - 1, 1.0 if use_toi else 0.0)
        advance(t)
    compute_loss(STEPS - 1)


def train(use_toi: bool, iterations: int, cue_x=CUE_X0, cue_v=CUE_V0) -> dict:
    """DiffTaichi's ``optimize``: ``iterations`` steps of gradient descent from the cue."""
    init_x[None] = list(cue_x)
    init_v[None] = list(cue_v)
    losses, seconds, grad0 = [], [], None
    for _ in range(iterations):
        start = time.perf_counter()
        clear()
        with ti.ad.Tape(loss=loss):
            forward(use_toi)
        value = float(loss[None])
        if grad0 is None:
            grad0 = {"x": init_x.grad[None].to_list(), "v": init_v.grad[None].to_list()}
        descend(LEARNING_RATE)
        seconds.append(time.perf_counter() - start)
        losses.append(value)
    final = {"x": init_x[None].to_list(), "v": init_v[None].to_list()}
    return {"losses": losses, "seconds": seconds, "grad0": grad0, "final": final}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--no-toi", action="store_true", help="drop DiffTaichi's x_inc term")
    parser.add_argument("--f64", action="store_true", help="float64 (a check; DiffTaichi: f32)")
    parser.add_argument("--threads", type=int, default=0, help="taichi's CPU threads (0: all)")
    parser.add_argument("--cue", type=float, nargs=4, default=None, help="x, y, vx, vy")
    args = parser.parse_args()
    setup(args.threads, args.f64)
    cue = args.cue or (*CUE_X0, *CUE_V0)
    out = train(not args.no_toi, args.iterations, cue[:2], cue[2:])
    out["taichi"] = ".".join(str(n) for n in ti.__version__)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
