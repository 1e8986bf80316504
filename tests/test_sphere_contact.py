"""Contact between spheres: closed-form collisions, time of impact, gradients against central
differences, conservation, and every pair vectorised under jit."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import central_fd
from diffsim import rollout
from diffsim.contact import SphereContact, WithContact, sphere_impact_fraction
from diffsim.integrators import SemiImplicitEuler, VelocityVerlet

_THETA = {"g": 0.0}  # rollout needs a θ with an array; these contacts read none


def _free(h, g=0.0):
    g = jnp.asarray(g, jnp.float64)
    return SemiImplicitEuler(lambda x, v, th: jnp.zeros_like(x) + g, h=h)


def _f64(*arrays):
    return tuple(jnp.asarray(a, jnp.float64) for a in arrays)


def _two_body(m1, m2, u1, u2, e):
    """Velocities after a head-on restitution collision (the textbook closed form)."""
    p = m1 * u1 + m2 * u2
    return (p - m2 * e * (u1 - u2)) / (m1 + m2), (p + m1 * e * (u1 - u2)) / (m1 + m2)


@pytest.mark.parametrize(("masses", "e"), list(itertools.product([None, (1.0, 3.0)], [1.0, 0.8])))
def test_head_on_collision_matches_closed_form(masses, e):
    # two balls on the x axis (in 2-D), radius 0.1: the gap 0.8 m closes at 1.5 m/s, so
    # they touch at t_c = 0.8/1.5 s, inside step 53 of h = 0.01 (not on a step boundary)
    r, h, steps = 0.1, 0.01, 100
    u1, u2 = 1.0, -0.5
    x0, v0 = _f64([[0.0, 0.2], [1.0, 0.2]], [[u1, 0.0], [u2, 0.0]])
    m1, m2 = masses or (1.0, 1.0)
    w1, w2 = _two_body(m1, m2, u1, u2, e)
    t_c, t_end = 0.8 / 1.5, h * steps
    exact_x = (u1 * t_c + w1 * (t_end - t_c), 1.0 + u2 * t_c + w2 * (t_end - t_c))
    for toi in (True, False):
        contact = SphereContact(radius=r, e=e, mass=masses and jnp.asarray(masses), toi=toi)
        x, v = rollout(WithContact(_free(h), contact), (x0, v0), _THETA, steps, trajectory=False)
        np.testing.assert_allclose(v[:, 0], [w1, w2], rtol=0, atol=1e-12)  # both variants
        np.testing.assert_allclose(v[:, 1], 0.0, atol=0)
        if toi:  # the positions too: the impact is located exactly
            np.testing.assert_allclose(x[:, 0], exact_x, rtol=0, atol=1e-12)
        else:  # the naive rule loses up to a step's flight at the old velocities
            assert 1e-4 < np.max(np.abs(np.asarray(x[:, 0]) - exact_x)) < h * abs(u1 - w1) + 1e-12


def test_impact_fraction_matches_analytic_contact_time():
    # oblique 2-D and 3-D approaches: |d0 + t w| = R solved in closed form (numpy, the
    # textbook (-b - √disc)/2a root), against the library's root inside one step
    rng = np.random.default_rng(0)
    for dim in (2, 3):
        for _ in range(20):
            radius_sum = 0.06
            n = rng.normal(size=dim)
            n /= np.linalg.norm(n)
            offset = rng.uniform(-0.8, 0.8) * radius_sum  # impact parameter: not grazing
            side = np.linalg.svd(n[None, :])[2][1]  # a unit vector normal to n
            w = -rng.uniform(0.5, 2.0) * n
            t_c_true = rng.uniform(0.05, 0.95)  # the contact time within a step of h = 1
            along = np.sqrt(radius_sum**2 - offset**2)
            d_c = along * n + offset * side
            d0 = d_c - t_c_true * w
            a, b, c = w @ w, 2 * d0 @ w, d0 @ d0 - radius_sum**2
            t_c = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
            hit, alpha = sphere_impact_fraction(jnp.asarray(d0), jnp.asarray(d0 + w), radius_sum)
            assert bool(hit)
            assert abs(float(alpha) - t_c) < 1e-10
            assert abs(float(alpha) - t_c_true) < 1e-10


def test_impact_fraction_misses_and_tunnelling():
    d0 = jnp.array([-1.0, 0.0])
    miss, _ = sphere_impact_fraction(d0, jnp.array([1.0, 0.2]), 0.05)  # passes 0.1 m by
    away, _ = sphere_impact_fraction(-d0, jnp.array([2.0, 0.0]), 0.5)  # receding
    late, _ = sphere_impact_fraction(d0, jnp.array([-0.9, 0.0]), 0.5)  # not yet in reach
    through, alpha = sphere_impact_fraction(d0, jnp.array([1.0, 0.0]), 0.5)  # tunnels
    assert not bool(miss) and not bool(away) and not bool(late)
    assert bool(through) and float(alpha) == 0.25


def test_oblique_equal_masses_exchange_normal_velocities():
    # an elastic collision of equal masses: the normal components are exchanged, the
    # tangential ones kept; positions from the event-driven closed form
    r, h, steps = 0.03, 0.003, 200
    x0, v0 = _f64([[0.1, 0.5], [0.4, 0.52]], [[0.6, 0.0], [0.0, 0.0]])
    d0, w = np.asarray(x0[0] - x0[1]), np.asarray(v0[0] - v0[1])
    a, b, c = w @ w, 2 * d0 @ w, d0 @ d0 - (2 * r) ** 2
    t_c = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
    xc = np.asarray(x0) + t_c * np.asarray(v0)
    n = (xc[0] - xc[1]) / (2 * r)
    vn = n @ w
    v_after = np.asarray(v0) + np.outer([-1.0, 1.0], vn * n)
    step = WithContact(_free(h), SphereContact(radius=r, e=1.0, toi=True))
    x, v = rollout(step, (x0, v0), _THETA, steps, trajectory=False)
    np.testing.assert_allclose(v, v_after, rtol=0, atol=1e-12)
    np.testing.assert_allclose(x, xc + (h * steps - t_c) * v_after, rtol=0, atol=1e-12)
    assert abs(float(jnp.sum(v**2) - jnp.sum(v0**2))) < 1e-12  # kinetic energy kept


def test_toi_gradient_is_the_true_one_where_the_naive_is_not():
    # equal masses, e = 1, head-on: ball 1 stops where it touches ball 2, x1(T) = x2(0) - 2r,
    # and ball 2 carries on: d x(T) / d(x1(0), x2(0)) = [[0, 1], [1, 0]] exactly
    r, h, steps = 0.1, 0.01, 100

    def final_x(pos, toi):
        x0 = jnp.stack([jnp.stack([pos[0], 0.0]), jnp.stack([pos[1], 0.0])])
        v0 = jnp.array([[1.0, 0.0], [0.0, 0.0]])
        step = WithContact(_free(h), SphereContact(radius=r, e=1.0, toi=toi))
        return rollout(step, (x0, v0), _THETA, steps, trajectory=False)[0][:, 0]

    pos = jnp.array([0.0, 0.503])
    true = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(jax.jacfwd(final_x)(pos, True), true, atol=1e-12)
    # the naive rule: ball 1 stops wherever the step that detected the overlap ended
    np.testing.assert_allclose(
        jax.jacfwd(final_x)(pos, False), [[1.0, 0.0], [0.0, 1.0]], atol=1e-12
    )


def _three_balls(mass=None, e=0.8, toi=True, integ=SemiImplicitEuler, steps=120, tau=None):
    r, h = 0.05, 0.005

    def final(z):
        x0, v0 = z[:6].reshape(3, 2), z[6:].reshape(3, 2)
        free = integ(lambda x, v, th: jnp.zeros_like(x) + jnp.array([0.0, -1.0]), h=h)
        contact = SphereContact(radius=r, e=e, mass=mass, toi=toi, smoothing=tau)
        step = WithContact(free, contact)
        x, v = rollout(step, (x0, v0), _THETA, steps, trajectory=False)
        return jnp.concatenate([x.ravel(), v.ravel()])

    # A rolls into B off-centre, B then into C: two impacts, neither grazing
    z0 = jnp.array([0.0, 0.0, 0.2, 0.03, 0.45, -0.02, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    return jax.jit(final), z0


@pytest.mark.parametrize("integ", [SemiImplicitEuler, VelocityVerlet])
def test_rollout_gradient_matches_central_differences(integ):
    # under gravity (uniform: the relative motion stays linear, the impact exact) with
    # unequal masses: the Jacobian of the final state w.r.t. every initial position and
    # velocity against central differences (eps 1e-6; agreement to 1e-6 relative)
    final, z0 = _three_balls(mass=jnp.array([1.0, 2.0, 0.5]), integ=integ)
    z1 = final(z0)
    assert float(jnp.abs(z1[8:10]).max()) > 0.1 and float(jnp.abs(z1[10:]).max()) > 0.1  # hit
    jac = jax.jacfwd(final)(z0)
    fd = central_fd(final, z0, eps=1e-6)
    assert np.all(np.isfinite(jac))
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-6 * float(jnp.abs(fd).max()))


def test_smoothed_rollout_gradient_matches_central_differences():
    # the smoothed contact (τ = 1 mm) is smooth everywhere: its Jacobian, through the same
    # two impacts, against central differences
    final, z0 = _three_balls(toi=False, tau=1e-3)
    jac = jax.jacfwd(final)(z0)
    fd = central_fd(final, z0, eps=1e-6)
    assert float(jnp.abs(final(z0)[10:]).max()) > 0.1  # the third ball was hit
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-5 * float(jnp.abs(fd).max()))


def test_momentum_conserved_and_energy_bounded():
    # 16 spheres with unequal masses in a box of 0.6 m, 300 steps: many simultaneous
    # impacts; total momentum (no external force) is kept to round-off by every variant
    n, r = 16, 0.04
    g = np.stack(np.meshgrid(np.arange(4), np.arange(4)), -1).reshape(n, 2) * 0.12
    rng = np.random.default_rng(1)
    x0, v0 = _f64(g + rng.uniform(-0.02, 0.02, (n, 2)), rng.normal(0, 0.5, (n, 2)))
    mass = jnp.asarray(rng.uniform(0.5, 2.0, n))
    for contact in (
        SphereContact(radius=r, e=0.9, mass=mass, toi=True),
        SphereContact(radius=r, e=0.9, mass=mass),
        SphereContact(radius=r, e=0.9, mass=mass, smoothing=1e-3),
    ):
        step = WithContact(_free(0.002), contact)
        _, vs = rollout(step, (x0, v0), _THETA, 300)
        p = jnp.einsum("i,tid->td", mass, vs)
        np.testing.assert_allclose(p, jnp.broadcast_to(mass @ v0, p.shape), atol=1e-12)
        energy = 0.5 * jnp.einsum("i,tid,tid->t", mass, vs, vs)
        assert float(energy[-1]) < float(0.5 * jnp.einsum("i,id,id->", mass, v0, v0))


def _reference_step(x, v, h, r, e):
    """An independent loop-over-pairs implementation of the naive Jacobi rule (numpy)."""
    x1, v1 = x + h * v, v.copy()
    dv = np.zeros_like(v)
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            d = x1[i] - x1[j]
            dist = np.linalg.norm(d)
            vn = (d / dist) @ (v1[i] - v1[j])
            if dist < 2 * r and vn < 0:
                dv[i] += -(1 + e) / 2 * vn * d / dist
                dv[j] -= -(1 + e) / 2 * vn * d / dist
    return x1, v1 + dv


def test_sixteen_spheres_vectorised_under_jit_match_a_pair_loop():
    n, r, h, e = 16, 0.05, 0.01, 0.8
    rng = np.random.default_rng(2)
    x = np.stack(np.meshgrid(np.arange(4), np.arange(4)), -1).reshape(n, 2) * 0.098
    v = rng.normal(0, 1.0, (n, 2))
    contact = WithContact(_free(h), SphereContact(radius=r, e=e))
    x1, v1 = jax.jit(lambda s: contact(s, {}))(_f64(x, v))
    x_ref, v_ref = _reference_step(x, v, h, r, e)
    assert np.abs(v_ref - (v + 0.0)).max() > 0.1  # several pairs collided
    np.testing.assert_allclose(x1, x_ref, atol=1e-14)
    np.testing.assert_allclose(v1, v_ref, atol=1e-12)
    # and in 3-D, batched over 4 scenes by vmap
    x3, v3 = _f64(rng.uniform(0, 0.3, (4, n, 3)), rng.normal(0, 1, (4, n, 3)))
    out = jax.jit(
        jax.vmap(lambda a, b: WithContact(_free(h), SphereContact(radius=r, toi=True))((a, b), {}))
    )
    xb, vb = out(x3, v3)
    assert xb.shape == (4, n, 3) and bool(jnp.all(jnp.isfinite(vb)))


def test_smoothed_tends_to_naive_and_reads_e_from_theta():
    x, v = _f64([[0.0, 0.0], [0.09, 0.01]], [[1.0, 0.0], [-1.0, 0.0]])
    free = _free(0.01)
    naive = WithContact(free, SphereContact(radius=0.05, e="e"))((x, v), {"e": 0.7})
    smooth = WithContact(free, SphereContact(radius=0.05, e="e", smoothing=1e-7))
    np.testing.assert_allclose(smooth((x, v), {"e": 0.7})[1], naive[1], atol=1e-9)

    def naive_v(e):
        return WithContact(free, SphereContact(radius=0.05, e="e"))((x, v), {"e": e})[1]

    de = jax.grad(lambda e: naive_v(e)[0, 0])(0.7)
    n = np.array([-0.07, -0.01]) / np.hypot(0.07, 0.01)  # end-of-step line of centres
    vn = n @ np.array([2.0, 0.0])
    assert abs(float(de) - (-vn * n[0] / 2)) < 1e-12  # dv_x/de = -vn n_x / 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"radius": -0.1}, "radius"),
        ({"radius": jnp.ones((2, 2))}, "radius"),
        ({"radius": 0.1, "e": 1.5}, "e"),
        ({"radius": 0.1, "mass": jnp.array([1.0, 0.0])}, "mass"),
        ({"radius": 0.1, "toi": True, "smoothing": 0.01}, "smoothing"),
        ({"radius": 0.1, "position": "project"}, "position"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SphereContact(**kwargs)


def test_bad_state_shape_and_per_sphere_lengths():
    step = WithContact(_free(0.01), SphereContact(radius=0.1))
    with pytest.raises(ValueError, match=r"shape \(N, d\)"):
        step(_f64(np.zeros((3, 4)), np.zeros((3, 4))), {})
    step = WithContact(_free(0.01), SphereContact(radius=jnp.ones(2)))
    with pytest.raises(ValueError, match="radius has 2 entries for 3 spheres"):
        step(_f64(np.zeros((3, 2)), np.zeros((3, 2))), {})
