"""The task in the peer frameworks: NVIDIA Warp, Taichi and PyTorch (bench extras).

No ``from __future__ import annotations`` here: Taichi and Warp read kernel annotations as
objects.

Each class builds its inputs once and exposes ``forward() -> loss`` and
``gradient() -> (loss, dL/dvy0)``, like the diffsim and JAX implementations, and is written
the way that framework's documentation teaches differentiable simulation.
"""

import numpy as np

from .task import GH, X_TARGET, Y_TARGET, E, H, initial_state


class WarpImpl:
    """NVIDIA Warp on device ``"cpu"``: one kernel launch per step recorded on a ``wp.Tape``.

    Reverse mode in Warp needs every step's state kept (no in-place overwrite), so the
    states live in T + 1 preallocated arrays, as in ``warp.sim``.
    """

    name = "warp"

    def __init__(self, n: int, steps: int):
        import warp as wp

        wp.config.quiet = True
        wp.init()
        self.wp = wp
        self.n, self.steps = n, steps
        kernels = _warp_kernels(wp)
        self._step, self._loss_kernel = kernels
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

    _WARP_KERNELS = (ball_step, final_loss)
    return _WARP_KERNELS


_TAICHI_READY = False


class TaichiImpl:
    """Taichi on ``ti.cpu``: the time loop inside one kernel, differentiated by ``ti.ad.Tape``.

    Taichi's autodiff keeps loop-carried locals on an "AD stack" per thread; a loop of T
    steps needs a stack of at least T + 1 entries (the default, 32, segfaults at T >= 50),
    so ``ti.init(ad_stack_size=...)`` is raised to cover T.
    """

    name = "taichi"

    def __init__(self, n: int, steps: int):
        import taichi as ti

        global _TAICHI_READY
        if not _TAICHI_READY:
            ti.init(arch=ti.cpu, ad_stack_size=max(1024, 2 * steps + 16), log_level=ti.ERROR)
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
    """PyTorch eager mode with autograd: the step on whole tensors, T times."""

    name = "torch"

    def __init__(self, n: int, steps: int):
        import torch

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
