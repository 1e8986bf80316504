# pyright: reportAttributeAccessIssue=false
# (mujoco is a compiled module without type stubs)
"""MuJoCo's names and coordinates, for tools that take a ``mujoco.MjModel``: a model field's
element by name (``body_mass:box``), and the velocity between two positions.

MuJoCo is imported inside each function: only a caller that passes a model needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MJ_OBJECTS = {"body": "mjOBJ_BODY", "geom": "mjOBJ_GEOM", "jnt": "mjOBJ_JOINT",
              "actuator": "mjOBJ_ACTUATOR", "dof": "mjOBJ_JOINT"}  # fmt: skip
"""A model field's prefix → the MuJoCo object type its rows index (``dof_*`` by joint name)."""


def element_id(model: Any, fld: str, element: str, text: str) -> int:
    """The row of the model field ``fld`` that belongs to the element named ``element``
    (a body for ``body_*``, a geom for ``geom_*``, a joint for ``jnt_*`` and ``dof_*`` — its
    first dof —, an actuator for ``actuator_*``); ``text`` is the name as the user wrote it,
    for the errors.

    Raises:
        ValueError: no model, a field whose rows are not named elements, an element name
            the model lacks (the message lists the model's names).
    """
    if model is None:
        raise ValueError(f"parameter {text!r} names an element: pass the MuJoCo model")
    import mujoco  # only with a model  # pyright: ignore[reportMissingImports]

    prefix = fld.split("_", 1)[0]
    if prefix not in MJ_OBJECTS:
        raise ValueError(f"parameter {text!r}: field {fld!r} has no named elements; use {fld}[i]")
    obj = getattr(mujoco.mjtObj, MJ_OBJECTS[prefix])
    i = mujoco.mj_name2id(model, obj, element)
    if i < 0:
        count = {"body": model.nbody, "geom": model.ngeom, "jnt": model.njnt,
                 "dof": model.njnt, "actuator": model.nu}[prefix]  # fmt: skip
        known = [mujoco.mj_id2name(model, obj, k) for k in range(count)]
        raise ValueError(
            f"parameter {text!r}: the model has no {prefix} named {element!r}; "
            f"{prefix}s: {', '.join(k for k in known if k) or 'none named'}"
        )
    if prefix == "dof":
        return int(model.jnt_dofadr[i])
    return int(i)


def differentiate_pos(model: Any, h: float, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """The velocity (nv,) that moves positions ``q0`` to ``q1`` (nq,) in ``h`` seconds:
    MuJoCo's ``mj_differentiatePos`` (quaternions of free and ball joints included)."""
    import mujoco  # pyright: ignore[reportMissingImports]

    v = np.zeros(model.nv)
    mujoco.mj_differentiatePos(model, v, h, q0, q1)
    return v


def has_quaternions(model: Any) -> bool:
    """Whether positions and velocities differ in size (a free or ball joint: nq ≠ nv)."""
    return model.nq != model.nv
