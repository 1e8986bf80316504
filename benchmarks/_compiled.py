"""The what-this-CPU-can-do reference: hand-written, hand-differentiated C.

Time runs inside each ball (the state stays in registers) — 32 balls at a time, so the
compiler vectorizes across balls (SIMD) and interleaves independent dependency chains; the
forward pass records one contact byte per ball-step in a small buffer (T × 32 bytes, in
cache), and the backward pass walks the flags in reverse applying the adjoint of the
piecewise-linear step:

    contact:   ā_y <- −ā_y,  ā_vy <- −e ā_vy
    free step: ā_vx <- ā_vx + h ā_x,  ā_vy <- ā_vy + h ā_y

Compiled at run time with ``gcc -O3 -march=native -ffp-contract=fast`` (fused multiply-
adds, so its contact flags match the other frameworks) into a temporary directory and
called through ``ctypes``. Single-threaded, like the other frameworks here.
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .task import GH, X_TARGET, Y_TARGET, E, H, initial_state

C_SOURCE = r"""
#include <stdlib.h>
#include <string.h>

/* GCC/Clang vector extensions: portable SIMD, 8 float lanes (AVX2 on x86-64). */
typedef float vf __attribute__((vector_size(32)));
typedef int vi __attribute__((vector_size(32)));
typedef signed char vc __attribute__((vector_size(8)));
#define L 8
#define K 4          /* vectors per block: 4 independent dependency chains */
#define B (L * K)    /* balls per block */

static inline vf sel(vi m, vf a, vf b) {  /* m ? a : b, lane-wise */
    return (vf)(((vi)a & m) | ((vi)b & ~m));
}

double balls(int n, int steps, float h, float gh, float e, float xt, float yt,
             const float *x0, const float *y0, const float *vx0, const float *vy0,
             float *grad_vy, int want_grad)
{
    /* one contact byte per ball-step of the current block: T x 32 bytes, stays in cache */
    signed char *flag = (signed char *)malloc((size_t)(steps > 0 ? steps : 1) * B);
    const vf zero = {0}, hv = zero + h, ghv = zero + gh, me = zero - e;
    double loss = 0.0;
    for (int i0 = 0; i0 < n; i0 += B) {
        int m = n - i0 < B ? n - i0 : B;
        float buf[4][B];
        for (int j = 0; j < B; ++j) {
            int i = i0 + (j < m ? j : 0);
            buf[0][j] = x0[i]; buf[1][j] = y0[i]; buf[2][j] = vx0[i]; buf[3][j] = vy0[i];
        }
        vf x[K], y[K], vx[K], vy[K];
        memcpy(x, buf[0], sizeof x); memcpy(y, buf[1], sizeof y);
        memcpy(vx, buf[2], sizeof vx); memcpy(vy, buf[3], sizeof vy);
        for (int t = 0; t < steps; ++t) {
            for (int k = 0; k < K; ++k) {
                vf v = vy[k] - ghv;
                vf yy = y[k] + v * hv;
                vi hit = (yy < zero) & (v < zero);
                x[k] = x[k] + vx[k] * hv;
                y[k] = sel(hit, -yy, yy);
                vy[k] = sel(hit, me * v, v);
                vc f = __builtin_convertvector(hit, vc);
                memcpy(flag + (size_t)t * B + k * L, &f, L);
            }
        }
        memcpy(buf[0], x, sizeof x); memcpy(buf[1], y, sizeof y);
        for (int j = 0; j < m; ++j) {
            float dx = buf[0][j] - xt, dy = buf[1][j] - yt;
            loss += (double)(dx * dx + dy * dy);
        }
        if (!want_grad) continue;
        /* adjoint; x's adjoint never reaches vy (the free step couples x only to vx) */
        vf ay[K], avy[K];
        for (int k = 0; k < K; ++k) { ay[k] = (y[k] - yt) * 2.0f; avy[k] = zero; }
        for (int t = steps - 1; t >= 0; --t) {
            for (int k = 0; k < K; ++k) {
                vc f;
                memcpy(&f, flag + (size_t)t * B + k * L, L);
                vi hit = __builtin_convertvector(f, vi);
                ay[k] = sel(hit, -ay[k], ay[k]);
                avy[k] = sel(hit, me * avy[k], avy[k]) + hv * ay[k];
            }
        }
        memcpy(buf[3], avy, sizeof avy);
        for (int j = 0; j < m; ++j) grad_vy[i0 + j] = buf[3][j];
    }
    free(flag);
    return loss;
}

/* Peak FMA rate: 16 independent vector chains of a = a * b + c (2 FLOPs per lane). */
float fma_loop(long iters)
{
    vf a[16], b = {0}, c = {0};
    b += 0.999999f; c += 1e-7f;
    for (int k = 0; k < 16; ++k) { a[k] = b * 0.0f + (float)k; }
    for (long i = 0; i < iters; ++i)
        for (int k = 0; k < 16; ++k) a[k] = a[k] * b + c;
    float s = 0.0f;
    for (int k = 0; k < 16; ++k) for (int j = 0; j < L; ++j) s += a[k][j];
    return s;
}
"""

FLAGS = ["-O3", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC"]


class CompilerMissing(RuntimeError):
    """No C compiler on PATH."""


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise CompilerMissing("no C compiler (gcc/cc) on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="diffsim-bench-"))
    src, lib = tmp / "balls.c", tmp / "balls.so"
    src.write_text(C_SOURCE)
    subprocess.run([cc, *FLAGS, str(src), "-o", str(lib)], check=True, capture_output=True)
    dll = ctypes.CDLL(str(lib))
    fp = ctypes.POINTER(ctypes.c_float)
    f = ctypes.c_float
    dll.balls.argtypes = [ctypes.c_int, ctypes.c_int, f, f, f, f, f, fp, fp, fp, fp, fp]
    dll.balls.argtypes.append(ctypes.c_int)
    dll.balls.restype = ctypes.c_double
    dll.fma_loop.argtypes = [ctypes.c_long]
    dll.fma_loop.restype = ctypes.c_float
    return dll


def flop_rate(seconds: float = 0.2) -> float:
    """This core's measured single-precision FMA rate in FLOP/s (compiled vector loop)."""
    import time

    lib = _library()
    iters = 1 << 16
    while True:
        t0 = time.perf_counter()
        lib.fma_loop(iters)
        dt = time.perf_counter() - t0
        if dt > seconds:
            break
        iters *= 2
    best = dt
    for _ in range(2):
        t0 = time.perf_counter()
        lib.fma_loop(iters)
        best = min(best, time.perf_counter() - t0)
    return iters * 16 * 8 * 2 / best


def compiler_flags() -> str:
    return " ".join(FLAGS[:3])


class CompiledImpl:
    """C reference: time loop inside each ball, 1-byte contact flags, hand adjoint."""

    name = "compiled-C"

    def __init__(self, n: int, steps: int):
        self._lib = _library()
        self._n, self._steps = n, steps
        self._s0 = tuple(np.ascontiguousarray(a) for a in initial_state(n))
        self._grad = np.zeros(n, np.float32)

    def _call(self, want_grad: bool) -> float:
        fp = ctypes.POINTER(ctypes.c_float)
        ptrs = [a.ctypes.data_as(fp) for a in (*self._s0, self._grad)]
        return self._lib.balls(
            self._n, self._steps, H, GH, E, X_TARGET, Y_TARGET, *ptrs, int(want_grad)
        )

    def forward(self) -> float:
        return float(self._call(False))

    def gradient(self) -> tuple[float, np.ndarray]:
        value = self._call(True)
        return float(value), self._grad.copy()
