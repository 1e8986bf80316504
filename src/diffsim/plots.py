"""Matplotlib figures of the contact pathologies (Agg backend, PNG files).

Needs the ``plots`` extra (matplotlib); without it a figure call raises
:class:`~diffsim.MissingExtraError` saying what to install. Each
``*_figure(path=None)`` computes its data with the library's own simulators, writes a
PNG (default ``./<name>.png``, in the current folder; the folder must exist: none is
created) and returns the path. ``diffsim plot NAME`` calls
them.

Example:
    >>> from diffsim.plots import DEFAULT_DIR, FIGURES, stiff_figure
    >>> list(FIGURES)  # the names ``diffsim plot NAME`` takes
    ['wall', 'smoothing', 'bounce', 'stiff', 'impact']
    >>> FIGURES["stiff"] is stiff_figure
    True
    >>> str(DEFAULT_DIR / "stiff.png")  # where a figure goes without a path
    'stiff.png'
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ._extras import require_extra

DEFAULT_DIR = Path(".")


def _plt():
    require_extra("plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path | str | None, name: str) -> Path:
    path = Path(path) if path is not None else DEFAULT_DIR / f"{name}.png"
    if path.suffix.lower() != ".png":
        raise ValueError(f"out must be a .png path, got {str(path)!r}")
    if not path.parent.is_dir():
        _plt().close(fig)
        raise ValueError(f"out: folder {str(path.parent)!r} does not exist (none is created)")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    _plt().close(fig)
    return path


def wall_figure(path: Path | str | None = None) -> Path:
    """Loss landscape of the wall demo: plateau, cliff, basin; the flight at v0 = 8.

    Example:
        >>> import pathlib, tempfile
        >>> from diffsim.plots import wall_figure
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = wall_figure(pathlib.Path(folder) / "wall.png")
        ...     path.name, path.read_bytes()[1:4]  # a PNG file
        ('wall.png', b'PNG')
    """
    from .systems import projectile_wall as pw

    plt = _plt()
    v0 = jnp.linspace(4.0, 14.0, 1001)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
    for v, color in ((8.0, "C3"), (pw.optimal_v0(), "C2")):
        x, y = pw.trajectory(v, num_points=300)
        ax0.plot(x, y, color=color, label=f"v₀ = {v:.2f} m/s")
    ax0.plot([pw.WALL_X, pw.WALL_X], [0, pw.WALL_HEIGHT], "k", lw=4, label="wall")
    ax0.plot(pw.TARGET, 0, "rx", ms=12, mew=3, label="target")
    ax0.set(xlabel="x (m)", ylabel="y (m)", title="flight (time-stepped, h = 1/240 s)")
    ax0.set_aspect("equal")
    ax0.legend(loc="upper left", fontsize=8)
    ax1.plot(v0, pw.loss_closed_form(v0), "k", lw=3, alpha=0.3, label="closed form")
    ax1.plot(v0, pw.loss(v0), "C0", lw=1.2, label="time-stepped")
    v_short, v_clear = pw.plateau_bounds()
    ax1.axvspan(v_short, v_clear, color="C1", alpha=0.15, label="plateau: gradient 0")
    ax1.axvline(v_clear, color="C3", ls="--", lw=1, label="cliff: gradient undefined")
    ax1.plot([8.0], [float(pw.loss(8.0))], "o", color="C3")
    ax1.set(xlabel="v₀ (m/s)", ylabel="loss (x − 10)²", title="loss landscape")
    ax1.legend(fontsize=8)
    return _save(fig, path, "wall")


def smoothing_figure(path: Path | str | None = None) -> Path:
    """Smoothed loss and its exact gradient for several temperatures τ.

    Example:
        >>> import pathlib, tempfile
        >>> from diffsim.plots import smoothing_figure
        >>> with tempfile.TemporaryDirectory() as folder:  # ~5 s: five smoothed models
        ...     path = smoothing_figure(pathlib.Path(folder) / "smoothing.png")
        ...     path.name, path.read_bytes()[1:4]  # a PNG file
        ('smoothing.png', b'PNG')
    """
    from .systems import projectile_wall as pw

    plt = _plt()
    v0 = jnp.linspace(6.0, 12.0, 601)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
    ax0.plot(v0, pw.loss(v0), "k", lw=2, label="hard (τ = 0)")
    ax1.plot(v0, jax.vmap(jax.grad(pw.loss))(v0), "k", lw=2, label="hard (τ = 0)")
    for tau in (0.05, 0.2, 0.5, 1.0):
        f = lambda v, t=tau: pw.loss(v, smoothing=t)  # noqa: E731
        ax0.plot(v0, f(v0), label=f"τ = {tau} m")
        ax1.plot(v0, jax.vmap(jax.grad(f))(v0), label=f"τ = {tau} m")
    ax0.set(xlabel="v₀ (m/s)", ylabel="loss", title="smoothed wall: σ((y_wall − 2)/τ)")
    ax1.axhline(0, color="gray", lw=0.5)
    ax1.set(xlabel="v₀ (m/s)", ylabel="d loss / d v₀", title="exact gradient of each model")
    ax1.set_ylim(-60, 30)
    ax0.legend(fontsize=8)
    ax1.legend(fontsize=8)
    return _save(fig, path, "smoothing")


def bounce_figure(path: Path | str | None = None) -> Path:
    """∂y_T/∂y0 and ∂y_T/∂v0 of the bouncing ball: naive vs TOI vs analytic, over y0.

    Example:
        >>> import pathlib, tempfile
        >>> from diffsim.plots import bounce_figure
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = bounce_figure(pathlib.Path(folder) / "bounce.png")
        ...     path.name, path.read_bytes()[1:4]  # a PNG file
        ('bounce.png', b'PNG')
    """
    from .systems import bouncing_ball_final_state_jacobian
    from .systems._bouncing_ball import bouncing_ball_derivatives_closed_form

    plt = _plt()
    h, steps, g, e, vy0 = 1 / 60, 36, 9.81, 0.8, -1.0
    t = steps * h
    y0 = jnp.linspace(0.4, 1.2, 161)  # one bounce before T throughout
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for toi, style, label in ((False, "C3", "naive"), (True, "C0", "time of impact")):
        J = jax.vmap(
            lambda y, toi=toi: bouncing_ball_final_state_jacobian(
                y, vy0, e, g, h=h, num_steps=steps, toi=toi
            )
        )(y0)
        axes[0].plot(y0, J["dy_dy0"], style, label=label)
        axes[1].plot(y0, J["dy_dvy0"], style, label=label)
    D = bouncing_ball_derivatives_closed_form(y0, vy0, e, g, t)
    axes[0].plot(y0, D["dy_dy0"], "k--", label="analytic")
    axes[1].plot(y0, D["dy_dvy0"], "k--", label="analytic")
    fig.suptitle(f"bouncing ball: g = {g} m/s², e = {e}, v₀ = {vy0} m/s, h = 1/60 s, T = {t:.2f} s")
    for ax, name in zip(axes, ("∂y_T/∂y₀", "∂y_T/∂v₀")):
        ax.set(xlabel="initial height y₀ (m)", ylabel=name)
        ax.set_title(f"{name}: naive contact vs time-of-impact correction")
        ax.legend(fontsize=8)
    return _save(fig, path, "bounce")


def stiff_figure(path: Path | str | None = None) -> Path:
    """Rollout Jacobian norm and energy error against the penalty stiffness k.

    Example:
        >>> import pathlib, tempfile
        >>> from diffsim.plots import stiff_figure
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = stiff_figure(pathlib.Path(folder) / "stiff.png")
        ...     path.name, path.read_bytes()[1:4]  # a PNG file
        ('stiff.png', b'PNG')
    """
    from .systems import stiff_contact_bounce_report, stiff_contact_jacobian_norm

    plt = _plt()
    h = 1 / 240
    k = jnp.logspace(2, 8, 49)
    norm = np.asarray(stiff_contact_jacobian_norm(k, h=h))
    rep = stiff_contact_bounce_report(k, h=h)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
    ax0.loglog(k, norm, "C0.-")
    ax0.set(
        xlabel="stiffness k (N/m), m = 1 kg",
        ylabel="‖∂s_T/∂s_0‖₂",
        title="rollout Jacobian through one bounce (T = 1 s, h = 1/240 s)",
    )
    k_crit = 4 / h**2
    for ax in (ax0, ax1):
        ax.axvline(k_crit, color="C3", ls="--", lw=1, label="ωh = 2 (k = 4m/h²)")
    ax1.loglog(k, np.abs(np.asarray(rep["energy_ratio"])), "C1.-", label="energy after / before")
    ax1.loglog(
        k, np.asarray(rep["steps_in_contact"]), "C2.-", label="states sampled in contact (T = 2 s)"
    )
    ax1.loglog(k, np.asarray(rep["contact_duration_steps"]), "k:", label="true contact time / h")
    ax1.set(xlabel="stiffness k (N/m)", title="what a fixed step makes of the contact")
    ax0.legend(fontsize=8)
    ax1.legend(fontsize=8)
    return _save(fig, path, "stiff")


def impact_convergence_data(
    hs=None,
    *,
    y0: float = 1.2,
    vy0: float = -1.0,
    e: float = 0.95,
    g: float = 9.81,
    t: float = 3.5,
):
    """The bouncing ball's time-stepped Jacobian against the event-driven exact one.

    For each integrator (velocity Verlet, semi-implicit Euler), impact location
    (``"substep"``, ``"linear"``) and step h: the rollout of ``round(t / h)`` steps of
    ``WithContact(integrator, Restitution(ground, toi=True, location=...))`` and its
    forward-mode Jacobian ∂(y_T, v_T)/∂(y0, v0, e), compared with the analytic Jacobian of
    :func:`~diffsim.systems.bouncing_ball_event_driven` at the same final time.
    Compute in float64 (``jax_enable_x64``; the CLI does) to see Verlet's round-off floor.

    Returns:
        ``{"h": array, (integrator name, location): {"error": relative error
        max|J - J*| / max|J*|, "dy_dy0": ∂y_T/∂y0}, "exact_dy_dy0": ∂y_T/∂y0 of the exact
        solution at each h's final time}``.

    Example:
        One step h = 0.01 s over 1 s (the figure takes ten steps over 3.5 s):

        >>> from diffsim.plots import impact_convergence_data
        >>> data = impact_convergence_data([0.01], t=1.0)
        >>> round(float(data["exact_dy_dy0"][0]), 3)
        1.355
        >>> sorted(k for k in data if isinstance(k, tuple))[:2]
        [('SemiImplicitEuler', 'linear'), ('SemiImplicitEuler', 'substep')]
        >>> bool(data[("VelocityVerlet", "substep")]["error"][0] < 1e-5)  # exact to rounding
        True
        >>> round(float(data[("VelocityVerlet", "linear")]["error"][0]), 3)  # first order in h
        0.003
    """
    from ._rollout import rollout
    from .contact import Plane, Restitution, WithContact
    from .integrators import SemiImplicitEuler, VelocityVerlet
    from .systems._bouncing_ball_events import bouncing_ball_event_driven_jacobian

    # by default steps that divide t (70 to 35000 of them): every h ends at the same time
    hs = t / np.round(np.geomspace(t / 0.05, t / 1e-4, 10)) if hs is None else np.asarray(hs)

    def gravity(x, v, th):
        return -th["g"] * jnp.ones_like(x)

    dtype = jnp.result_type(float)
    p = jnp.asarray([y0, vy0, e], dtype)
    out: dict = {"h": hs}
    exact_rows = []
    for h in hs:
        n = round(t / h)
        J = bouncing_ball_event_driven_jacobian(y0, vy0, e, g, n * h)
        exact_rows.append(
            [[float(J[f"d{q}_d{k}"]) for k in ("y0", "vy0", "e")] for q in ("y", "vy")]
        )
    exact = np.asarray(exact_rows)
    out["exact_dy_dy0"] = exact[:, 0, 0]
    for integrator in (VelocityVerlet, SemiImplicitEuler):
        for location in ("substep", "linear"):
            errors, dy_dy0 = [], []
            for h, J_ex in zip(hs, exact):
                contact = Restitution(Plane.ground(), e="e", toi=True, location=location)
                step = WithContact(integrator(gravity, h=float(h)), contact)
                n = round(t / h)

                def final(q, step=step, n=n):
                    theta = {"e": q[2], "g": jnp.asarray(g, dtype)}
                    return jnp.stack(rollout(step, (q[0], q[1]), theta, n, trajectory=False))

                J = np.asarray(jax.jit(jax.jacfwd(final))(p))
                errors.append(np.max(np.abs(J - J_ex)) / np.max(np.abs(J_ex)))
                dy_dy0.append(J[0, 0])
            out[(integrator.__name__, location)] = {
                "error": np.asarray(errors),
                "dy_dy0": np.asarray(dy_dy0),
            }
    return out


def impact_figure(path: Path | str | None = None) -> Path:
    """Bouncing-ball Jacobian error against h: the impact located on the integrator's own
    sub-step vs the linear interpolation of the gap, for velocity Verlet and semi-implicit
    Euler (four bounces, e = 0.95, T = 3.5 s)."""
    plt = _plt()
    data = impact_convergence_data()
    hs = data["h"]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
    styles = {
        ("VelocityVerlet", "substep"): ("C0", "-", "o", "velocity Verlet, sub-step root"),
        ("VelocityVerlet", "linear"): ("C0", ":", "s", "velocity Verlet, linear"),
        ("SemiImplicitEuler", "substep"): ("C3", "-", "o", "semi-implicit Euler, sub-step root"),
        ("SemiImplicitEuler", "linear"): ("C3", ":", "s", "semi-implicit Euler, linear"),
    }
    for key, (color, ls, marker, label) in styles.items():
        d = data[key]
        ax0.loglog(
            hs, np.maximum(d["error"], 1e-16), color=color, ls=ls, marker=marker, label=label
        )
        ax1.semilogx(hs, d["dy_dy0"], color=color, ls=ls, marker=marker, label=label)
    ax0.loglog(hs, 40 * hs, color="gray", ls="--", lw=0.8, label="slope 1")
    ax0.set(
        xlabel="step h (s)",
        ylabel="max |J − J*| / max |J*|",
        title="Jacobian ∂(y_T, v_T)/∂(y₀, v₀, e) vs event-driven exact",
    )
    ax1.semilogx(hs, data["exact_dy_dy0"], "k--", lw=1.2, zorder=5, label="exact")
    ax1.axhline(0, color="gray", lw=0.5)
    ax1.set(xlabel="step h (s)", ylabel="∂y_T/∂y₀", title="∂y_T/∂y₀ (exact −0.074)")
    ax1.set_ylim(-0.6, 0.6)
    fig.suptitle("bouncing ball: y₀ = 1.2 m, v₀ = −1 m/s, e = 0.95, g = 9.81 m/s², T = 3.5 s")
    ax0.legend(fontsize=8)
    ax1.legend(fontsize=8)
    return _save(fig, path, "impact")


FIGURES = {
    "wall": wall_figure,
    "smoothing": smoothing_figure,
    "bounce": bounce_figure,
    "stiff": stiff_figure,
    "impact": impact_figure,
}
