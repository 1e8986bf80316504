"""The what-this-CPU-can-do reference: hand-written, hand-differentiated C.

Time runs inside each ball (the state stays in registers), 64 balls at a time (8 vectors of
8 float lanes; smaller blocks for the last few balls, so N = 1 runs one vector), so the
compiler vectorizes across balls (SIMD) and interleaves 8 independent dependency chains.
The forward pass of the gradient records one contact *bit* per ball-step (``movemask``
under AVX2, a branch-free OR of lane bits elsewhere) in a small buffer (T × 8 bytes, in
cache); the backward pass walks the bits in reverse applying the adjoint of the
piecewise-linear step:

    contact:   ā_y <- −ā_y,  ā_vy <- −e ā_vy
    free step: ā_vx <- ā_vx + h ā_x,  ā_vy <- ā_vy + h ā_y

The plain forward stores no flags. Compiled at run time with ``gcc -O3 -march=native
-ffp-contract=fast`` (fused multiply-adds, so its contact flags match XLA's and its gradients
agree with diffsim's bit for bit) into a temporary directory and called through ``ctypes``.
Single-threaded (:attr:`CompiledImpl.threads`): one core's worth, the machine floor's unit.
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* GCC/Clang vector extensions: portable SIMD, 8 float lanes (AVX2 on x86-64). */
typedef float vf __attribute__((vector_size(32)));
typedef int vi __attribute__((vector_size(32)));
#define L 8
#define KMAX 8             /* up to 8 vectors per block: 8 independent dependency chains */

static inline vf sel(vi m, vf a, vf b) {  /* m ? a : b, lane-wise */
    return (vf)(((vi)a & m) | ((vi)b & ~m));
}

/* A lane mask (all ones / all zeros per lane) as 8 bits, and back. */
static inline uint64_t pack8(vi m) {
#ifdef __AVX2__
    return (uint64_t)(unsigned)_mm256_movemask_ps((__m256)m);
#else
    uint64_t b = 0;
    for (int j = 0; j < L; ++j) b |= (uint64_t)(m[j] & 1) << j;
    return b;
#endif
}

static inline vi unpack8(uint64_t b) {
    const vi lane = {1, 2, 4, 8, 16, 32, 64, 128};
    vi bb = (vi){0} + (int)(b & 0xff);
    return (bb & lane) != 0;
}

/* Balls i0 .. i0 + m - 1 (m <= 8 K), K vectors of 8 lanes; K and want_grad are constants
   at every call site, so each (K, want_grad) pair compiles to its own unrolled loop. */
static inline __attribute__((always_inline)) double block(
    const int K, const int want_grad, int i0, int m, int steps,
    float h, float gh, float e, float xt, float yt,
    const float *x0, const float *y0, const float *vx0, const float *vy0,
    float *grad_vy, uint64_t *flag)
{
    const vf zero = {0}, hv = zero + h, ghv = zero + gh, me = zero - e;
    float buf[4][L * KMAX];
    for (int j = 0; j < L * K; ++j) {
        int i = i0 + (j < m ? j : 0);
        buf[0][j] = x0[i]; buf[1][j] = y0[i]; buf[2][j] = vx0[i]; buf[3][j] = vy0[i];
    }
    vf x[KMAX], y[KMAX], vx[KMAX], vy[KMAX];
    memcpy(x, buf[0], K * sizeof(vf)); memcpy(y, buf[1], K * sizeof(vf));
    memcpy(vx, buf[2], K * sizeof(vf)); memcpy(vy, buf[3], K * sizeof(vf));
    for (int t = 0; t < steps; ++t) {
        uint64_t bits = 0;
        for (int k = 0; k < K; ++k) {
            vf v = vy[k] - ghv;
            vf yy = y[k] + v * hv;
            vi hit = (yy < zero) & (v < zero);
            x[k] = x[k] + vx[k] * hv;
            y[k] = sel(hit, -yy, yy);
            vy[k] = sel(hit, me * v, v);
            if (want_grad) bits |= pack8(hit) << (L * k);
        }
        if (want_grad) flag[t] = bits;  /* one bit per ball-step */
    }
    memcpy(buf[0], x, K * sizeof(vf)); memcpy(buf[1], y, K * sizeof(vf));
    double loss = 0.0;
    for (int j = 0; j < m; ++j) {
        float dx = buf[0][j] - xt, dy = buf[1][j] - yt;
        loss += (double)(dx * dx + dy * dy);
    }
    if (!want_grad) return loss;
    /* adjoint; x's adjoint never reaches vy (the free step couples x only to vx) */
    vf ay[KMAX], avy[KMAX];
    for (int k = 0; k < K; ++k) { ay[k] = (y[k] - yt) * 2.0f; avy[k] = zero; }
    for (int t = steps - 1; t >= 0; --t) {
        uint64_t bits = flag[t];
        for (int k = 0; k < K; ++k) {
            vi hit = unpack8(bits >> (L * k));
            ay[k] = sel(hit, -ay[k], ay[k]);
            avy[k] = sel(hit, me * avy[k], avy[k]) + hv * ay[k];
        }
    }
    memcpy(buf[3], avy, K * sizeof(vf));
    for (int j = 0; j < m; ++j) grad_vy[i0 + j] = buf[3][j];
    return loss;
}

#define ARGS steps, h, gh, e, xt, yt, x0, y0, vx0, vy0, grad_vy, flag
#define DISPATCH(G)                                                          \
    for (int i0 = 0; i0 < n;) {                                              \
        int r = n - i0, m;                                                   \
        if (r > 4 * L)      { m = r < 8 * L ? r : 8 * L; loss += block(8, G, i0, m, ARGS); } \
        else if (r > 2 * L) { m = r; loss += block(4, G, i0, m, ARGS); }     \
        else if (r > L)     { m = r; loss += block(2, G, i0, m, ARGS); }     \
        else                { m = r; loss += block(1, G, i0, m, ARGS); }     \
        i0 += m;                                                             \
    }

double balls(int n, int steps, float h, float gh, float e, float xt, float yt,
             const float *x0, const float *y0, const float *vx0, const float *vy0,
             float *grad_vy, int want_grad)
{
    double loss = 0.0;
    uint64_t *flag = NULL;
    if (!want_grad) {
        DISPATCH(0)
        return loss;
    }
    /* one 64-bit word of contact bits per step of the current block: T x 8 bytes, in cache */
    flag = (uint64_t *)malloc((size_t)(steps > 0 ? steps : 1) * sizeof(uint64_t));
    DISPATCH(1)
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
    """C reference: time loop inside each ball, 1-bit contact flags, hand adjoint."""

    name = "compiled-C"
    threads = 1

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
