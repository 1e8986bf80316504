"""The task in the peer frameworks: NVIDIA Warp, Taichi and PyTorch (bench extras).

No ``from __future__ import annotations`` here: Taichi and Warp read kernel annotations as
objects.

Each class builds its inputs once and exposes ``forward() -> loss`` and
``gradient() -> (loss, dL/dvy0)``, like the diffsim and JAX implementations, and is written
the way that framework's documentation teaches differentiable simulation.
"""

import os

import numpy as np

from .task import GH, X_TARGET, Y_TARGET, E, H, initial_state


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), the thread count of threaded peers."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class WarpImpl:
    """NVIDIA Warp on device ``"cpu"``: one fused kernel, one thread per ball, hand adjoint.

    Each thread runs all T steps of its ball with the state in registers, records one
    contact bit per step (32 steps to a ``uint32`` word, ``bits[i, t // 32]``), adds its
    ball's loss, and then walks the bits backwards applying the adjoint of the
    piecewise-linear step (as the compiled-C reference does): one launch for the forward,
    one for the gradient. Warp's own reverse mode (``wp.Tape``) cannot differentiate a
    dynamic loop that carries state, so Warp's autodiff route is one launch per step with
    T + 1 state arrays (:class:`WarpTapeImpl`, the ``warp-tape`` row), 10x slower at
    N = 4096 and 1000x at N = 1.

    The forward records the contact bits too: with the bit store inside it the compiler
    keeps the contact test a (well predicted) branch rather than a select on the
    dependency chain, which made the forward 3x faster than the same kernel without it.
    Warp runs CPU kernels on one thread.
    """

    name = "warp"
    threads = 1

    def __init__(self, n: int, steps: int):
        wp = _warp()
        self.wp = wp
        self.n, self.steps = n, steps
        self._kernel = _warp_kernels(wp)[2]
        dev = "cpu"
        self._s0 = [wp.array(a, dtype=wp.float32, device=dev) for a in initial_state(n)]
        self._bits = wp.zeros((n, max(1, (steps + 31) // 32)), dtype=wp.uint32, device=dev)
        self._loss = wp.zeros(1, dtype=wp.float32, device=dev)
        self._grad = wp.zeros(n, dtype=wp.float32, device=dev)

    def _run(self, want_grad: int) -> float:
        self._loss.zero_()
        self.wp.launch(
            self._kernel,
            dim=self.n,
            inputs=[*self._s0, self.steps, GH, H, E, X_TARGET, Y_TARGET, want_grad],
            outputs=[self._bits, self._loss, self._grad],
            device="cpu",
        )
        return float(self._loss.numpy()[0])

    def forward(self) -> float:
        return self._run(0)

    def gradient(self) -> tuple[float, np.ndarray]:
        value = self._run(1)
        return value, self._grad.numpy().copy()


class WarpTapeImpl:
    """Warp's autodiff route: one kernel launch per step recorded on a ``wp.Tape``.

    Reverse mode in Warp needs every step's state kept (no in-place overwrite), so the
    states live in T + 1 preallocated arrays, as in ``warp.sim``. An extra row
    (``--frameworks ...,warp-tape``), not in the default set: :class:`WarpImpl` is faster.
    """

    name = "warp-tape"
    threads = 1

    def __init__(self, n: int, steps: int):
        wp = _warp()
        self.wp = wp
        self.n, self.steps = n, steps
        self._step, self._loss_kernel, _ = _warp_kernels(wp)
        dev = "cpu"
        s0 = initial_state(n)
        self._states = []
        for t in range(steps + 1):
            arrs = [
                wp.array(a, dtype=wp.float32, device=dev, requires_grad=True)
                if t == 0
                else wp.zeros(n, dtype=wp.float32, device=dev, requires_grad=True)
                for a in s0
            ]
            self._states.append(arrs)
        self._loss = wp.zeros(1, dtype=wp.float32, device=dev, requires_grad=True)

    def _run(self):
        wp = self.wp
        self._loss.zero_()
        for t in range(self.steps):
            wp.launch(
                self._step,
                dim=self.n,
                inputs=[*self._states[t], GH, H, E],
                outputs=self._states[t + 1],
                device="cpu",
            )
        x, y = self._states[-1][0], self._states[-1][1]
        wp.launch(
            self._loss_kernel,
            dim=self.n,
            inputs=[x, y, X_TARGET, Y_TARGET],
            outputs=[self._loss],
            device="cpu",
        )

    def forward(self) -> float:
        self._run()
        return float(self._loss.numpy()[0])

    def gradient(self) -> tuple[float, np.ndarray]:
        wp = self.wp
        tape = wp.Tape()
        with tape:
            self._run()
        tape.backward(loss=self._loss)
        g = self._states[0][3].grad.numpy().copy()
        value = float(self._loss.numpy()[0])
        tape.zero()
        return value, g


_WARP_KERNELS = None


def _warp():
    import warp as wp

    wp.config.quiet = True
    wp.init()
    return wp


def _warp_kernels(wp):
    global _WARP_KERNELS
    if _WARP_KERNELS is not None:
        return _WARP_KERNELS

    @wp.kernel
    def ball_step(
        x: wp.array(dtype=wp.float32),
        y: wp.array(dtype=wp.float32),
        vx: wp.array(dtype=wp.float32),
        vy: wp.array(dtype=wp.float32),
        gh: float,
        h: float,
        e: float,
        x1: wp.array(dtype=wp.float32),
        y1: wp.array(dtype=wp.float32),
        vx1: wp.array(dtype=wp.float32),
        vy1: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        v = vy[i] - gh
        yy = y[i] + v * h
        x1[i] = x[i] + vx[i] * h
        vx1[i] = vx[i]
        if yy < 0.0 and v < 0.0:
            y1[i] = -yy
            vy1[i] = -e * v
        else:
            y1[i] = yy
            vy1[i] = v

    @wp.kernel
    def final_loss(
        x: wp.array(dtype=wp.float32),
        y: wp.array(dtype=wp.float32),
        xt: float,
        yt: float,
        loss: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        dx = x[i] - xt
        dy = y[i] - yt
        wp.atomic_add(loss, 0, dx * dx + dy * dy)

    @wp.kernel
    def balls(
        x0: wp.array(dtype=wp.float32),
        y0: wp.array(dtype=wp.float32),
        vx0: wp.array(dtype=wp.float32),
        vy0: wp.array(dtype=wp.float32),
        steps: int,
        gh: float,
        h: float,
        e: float,
        xt: float,
        yt: float,
        want_grad: int,
        bits: wp.array2d(dtype=wp.uint32),
        loss: wp.array(dtype=wp.float32),
        grad_vy0: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        x = x0[i]
        y = y0[i]
        vx = vx0[i]
        vy = vy0[i]
        word = wp.uint32(0)
        for t in range(steps):
            vy = vy - gh
            x = x + vx * h
            y = y + vy * h
            if y < 0.0 and vy < 0.0:
                y = -y
                vy = -e * vy
                word = word | (wp.uint32(1) << wp.uint32(t & 31))
            if (t & 31) == 31 or t == steps - 1:
                bits[i, t >> 5] = word
                word = wp.uint32(0)
        dx = x - xt
        dy = y - yt
        wp.atomic_add(loss, 0, dx * dx + dy * dy)
        if want_grad == 0:
            return
        # adjoint; x's adjoint never reaches vy (the free step couples x only to vx)
        ay = 2.0 * dy
        avy = wp.float32(0.0)
        for s in range(steps):
            t = steps - 1 - s
            if s == 0 or (t & 31) == 31:
                word = bits[i, t >> 5]
            if (word & (wp.uint32(1) << wp.uint32(t & 31))) != wp.uint32(0):
                ay = -ay
                avy = -e * avy
            avy = avy + h * ay
        grad_vy0[i] = avy

    _WARP_KERNELS = (ball_step, final_loss, balls)
    return _WARP_KERNELS


_TAICHI_READY = False


class TaichiImpl:
    """Taichi on ``ti.cpu``: the time loop inside one kernel, differentiated by ``ti.ad.Tape``.

    Taichi's autodiff keeps loop-carried locals on an "AD stack" per thread; a loop of T
    steps needs a stack of at least T + 1 entries (the default, 32, segfaults at T >= 50),
    so ``ti.init(ad_stack_size=...)`` is raised to cover T. Ball-major: one thread per ball
    runs all T steps with the state in registers; the kernel's ball loop is spread over
    :func:`usable_cores` threads (``cpu_max_num_threads``, Taichi's default, set explicitly).
    """

    name = "taichi"
    threads = usable_cores()

    def __init__(self, n: int, steps: int):
        import taichi as ti

        global _TAICHI_READY
        if not _TAICHI_READY:
            ti.init(
                arch=ti.cpu,
                ad_stack_size=max(1024, 2 * steps + 16),
                cpu_max_num_threads=self.threads,
                log_level=ti.ERROR,
            )
            _TAICHI_READY = True
        self.ti = ti
        self.n, self.steps = n, steps
        fields = [ti.field(ti.f32, shape=n, needs_grad=True) for _ in range(6)]
        self.x0, self.y0, self.vx0, self.vy0, self.xT, self.yT = fields
        self.loss = ti.field(ti.f32, shape=(), needs_grad=True)
        for f, a in zip(fields[:4], initial_state(n)):
            f.from_numpy(a)
        self._kernel = _taichi_kernel(ti)

    def _run(self):
        self.loss[None] = 0.0
        self._kernel(
            self.x0,
            self.y0,
            self.vx0,
            self.vy0,
            self.xT,
            self.yT,
            self.loss,
            self.steps,
            GH,
            H,
            E,
            X_TARGET,
            Y_TARGET,
        )

    def forward(self) -> float:
        self._run()
        return float(self.loss[None])

    def gradient(self) -> tuple[float, np.ndarray]:
        with self.ti.ad.Tape(loss=self.loss):
            self._run()
        return float(self.loss[None]), self.vy0.grad.to_numpy()


_TAICHI_KERNEL = None


def _taichi_kernel(ti):
    global _TAICHI_KERNEL
    if _TAICHI_KERNEL is not None:
        return _TAICHI_KERNEL

    @ti.kernel
    def simulate(
        x0: ti.template(),
        y0: ti.template(),
        vx0: ti.template(),
        vy0: ti.template(),
        xT: ti.template(),
        yT: ti.template(),
        loss: ti.template(),
        steps: ti.i32,
        gh: ti.f32,
        h: ti.f32,
        e: ti.f32,
        xt: ti.f32,
        yt: ti.f32,
    ):
        for i in x0:
            x = x0[i]
            y = y0[i]
            vx = vx0[i]
            vy = vy0[i]
            for _ in range(steps):
                vy = vy - gh
                x = x + vx * h
                y = y + vy * h
                hit = (y < 0.0) & (vy < 0.0)
                y = ti.select(hit, -y, y)
                vy = ti.select(hit, -e * vy, vy)
            xT[i] = x
            yT[i] = y
            loss[None] += (x - xt) ** 2 + (y - yt) ** 2

    _TAICHI_KERNEL = simulate
    return simulate


class TorchImpl:
    """PyTorch eager mode with autograd: the step on whole tensors, T times.

    Intra-op threads: :func:`usable_cores` (PyTorch's default, set explicitly); element-wise
    ops on fewer than 32768 elements run on one thread anyway. Tried and slower here:
    ``torch.compile`` of the step called T times (guards and a compiled autograd node per
    step: 2x the forward and 7x the gradient at N = 4096; compiling the whole loop unrolls
    T steps), in-place ops in the forward (no change: the cost is per op, not per byte),
    and ``torch.jit.script`` (deprecated; within the noise). Runs with libgomp's default
    wait policy: ``OMP_WAIT_POLICY=PASSIVE`` made it 1.4x slower.
    """

    name = "torch"
    threads = usable_cores()

    def __init__(self, n: int, steps: int):
        import torch

        torch.set_num_threads(self.threads)
        self.torch = torch
        self.steps = steps
        self._s0 = [torch.from_numpy(a.copy()) for a in initial_state(n)]

    def _loss(self, vy0):
        torch = self.torch
        x, y, vx, _ = self._s0
        vy = vy0
        for _ in range(self.steps):
            vy = vy - GH
            x = x + vx * H
            y = y + vy * H
            hit = (y < 0) & (vy < 0)
            y = torch.where(hit, -y, y)
            vy = torch.where(hit, -E * vy, vy)
        return torch.sum((x - X_TARGET) ** 2 + (y - Y_TARGET) ** 2)

    def forward(self) -> float:
        with self.torch.no_grad():
            return float(self._loss(self._s0[3]))

    def gradient(self) -> tuple[float, np.ndarray]:
        vy0 = self._s0[3].clone().requires_grad_(True)
        loss = self._loss(vy0)
        loss.backward()
        return float(loss.detach()), vy0.grad.numpy().copy()
