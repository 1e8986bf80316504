# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs: its attributes are unknown to pyright)
"""Loading: an ``MjModel`` from MJCF, and :func:`load`, the adapter's entry point."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import mujoco

from ..._checks import check_int
from ._compare import COMPARE_STEPS, MAX_COMPARE_STEPS
from ._options import MAX_ITERATIONS
from ._size import check_size
from ._step import MjxStep


def _parse(load: Callable[[], mujoco.MjModel], what: str) -> mujoco.MjModel:
    """Run MuJoCo's MJCF parser ``load`` with its warnings caught (MuJoCo prints them on
    stderr and appends them to ``MUJOCO_LOG.TXT`` in the working directory otherwise): a
    NaN in the XML is a ``ValueError``, other warnings become Python warnings."""
    caught: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(caught.append)
    try:
        model = load()
    except ValueError as err:
        raise ValueError(f"{what} could not be loaded: {err}") from None
    finally:
        mujoco.set_mju_user_warning(previous)
    for message in caught:
        if "NaN" in message:
            raise ValueError(f"{what} contains a NaN (MuJoCo: {message.strip()})")
        warnings.warn(f"MuJoCo, loading {what}: {message.strip()}", UserWarning, stacklevel=4)
    return model


def mj_model_from(source: Any) -> mujoco.MjModel:
    """An ``MjModel`` from a path, an XML string or a model; ``ValueError`` naming the file
    and MuJoCo's parse error.

    Example:
        >>> from diffsim.engines.mjx import mj_model_from
        >>> m = mj_model_from("<mujoco><worldbody><body><joint type='slide'/>"
        ...                   "<geom size='0.1'/></body></worldbody></mujoco>")
        >>> m.nq, mj_model_from(m) is m
        (1, True)
    """
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and not source.lstrip().startswith("<")
    ):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise ValueError(f"MJCF file {path!r} is a directory, not an MJCF file")
        if not os.path.isfile(path):
            raise ValueError(f"MJCF file {path!r} not found")
        return _parse(lambda: mujoco.MjModel.from_xml_path(path), f"MJCF file {path!r}")
    if isinstance(source, str):
        return _parse(lambda: mujoco.MjModel.from_xml_string(source), "MJCF XML string")
    raise TypeError(
        f"model must be an MJCF file path, an MJCF XML string or a mujoco.MjModel, got {source!r}"
    )


def load(
    model: Any,
    *,
    iterations: int | None = None,
    compare: bool | int = False,
    max_bytes: int | None = None,
) -> MjxStep:
    """Build a diffsim step from a MuJoCo model, run by MJX.

    Args:
        model: an MJCF file path (``str`` or ``os.PathLike``), an MJCF XML string (starting
            with ``<``) or a ``mujoco.MjModel``.
        iterations: ``None`` (default): MJX's constraint solver runs to convergence
            (``opt.iterations``, ``opt.tolerance``); an integer k >= 1: exactly k Newton
            iterations per step, warm-started (fixed cost; see the module docstring for
            its accuracy), k <= 2**31 − 1; values only: differentiating a step loaded
            with ``iterations=k`` raises ``ValueError``.
        compare: ``False`` (default): nothing more; ``True`` or a number of steps n:
            :meth:`MjxStep.compare_with_mujoco` over the first n steps of MuJoCo C's own
            trajectory from the initial state (``True``: :data:`COMPARE_STEPS`), its result
            kept as ``step.mujoco_gap`` and added to ``step.report``, and a
            ``UserWarning`` with the size when MJX's model differs from MuJoCo C's there.
            It compiles one step (5-10 s on a CPU for the zoo's models), which is why it is
            not the default; ``diffsim diagnose --mjcf`` runs it.
        max_bytes: the most one state's dense constraint Jacobian may take, estimated
            before MJX builds the model (:func:`~diffsim.engines.mjx._size.estimate`: the
            geom pairs that may collide × their rows × nv × 8 bytes, a lower bound);
            ``None`` (default): half this machine's physical memory.

    Returns:
        :class:`MjxStep`, callable as ``step(state, theta[, u])``.

    Raises:
        ValueError: a missing file, MJCF that MuJoCo cannot parse or that contains a NaN
            (the message names the file and gives MuJoCo's error); an option MJX cannot run
            (the message names the MJCF option and the value to use; see the module
            docstring); a model with no degrees of freedom (``nv = 0``: nothing moves);
            ``iterations`` out of range; a model over ``max_bytes`` (the message gives the
            estimate), refused before MJX spends minutes building it. MuJoCo's other parse
            warnings (e.g. deprecated attributes) become Python ``UserWarning``s instead of
            lines on stderr.
        TypeError: ``model`` of another type.

    Example:
        >>> import diffsim
        >>> from diffsim.engines import mjx, scenes
        >>> step = mjx.load(scenes.path("free_flight"))
        >>> sT = diffsim.rollout(step, step.initial_state(), step.theta("gravity"), 10,
        ...                      trajectory=False)
        >>> sT.qpos.shape
        (7,)
    """
    if iterations is not None:
        iterations = check_int("iterations", iterations, minimum=1, maximum=MAX_ITERATIONS)
    if compare is not False:
        compare = COMPARE_STEPS if compare is True else compare
        compare = check_int("compare", compare, minimum=0, maximum=MAX_COMPARE_STEPS)
    if max_bytes is not None:
        max_bytes = check_int("max_bytes", max_bytes, minimum=1)
    mj_model = mj_model_from(model)
    is_file = isinstance(model, os.PathLike) or (
        isinstance(model, str) and not model.lstrip().startswith("<")
    )
    check_size(mj_model, max_bytes, f"MJCF file {os.fspath(model)!r}" if is_file else "the model")
    step = MjxStep(mj_model, iterations)
    if not compare:
        return step
    gap = step.compare_with_mujoco(int(compare))
    if gap.differs:
        warnings.warn(
            f"{gap}: MJX's model (its collision, its contact frames) is not MuJoCo C's "
            "here, so values and derivatives are MJX's model's, not what finite "
            "differences of MuJoCo C give",
            UserWarning,
            stacklevel=2,
        )
    # the step is immutable: the one returned is built with the comparison's result
    return MjxStep(mj_model, iterations, mujoco_gap=gap)
