r"""The fitted entries of θ (:class:`Parameter`), read from names (:func:`parse_parameters`),
and the reparametrisation that keeps each strictly inside its bounds: the solver works on z,
with :math:`θ = lo + e^z` (a lower bound), :math:`θ = hi - e^z` (an upper bound),
:math:`θ = lo + (hi - lo)\,σ(z)` (both) or :math:`θ = θ_0 + |θ_0| z` (none)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..engines._mjx_names import element_id


@dataclass(frozen=True)
class Parameter:
    """One fitted entry of θ: ``theta[field][index]``, its start and its bounds.

    Attributes:
        field: the key of θ (a dict) that holds it, e.g. ``"k"`` or ``"body_mass"``.
        index: the element of ``theta[field]`` (``()`` for a scalar, an int or a tuple).
        start: the starting value (default: the value in θ).
        lower, upper: bounds (default unbounded); the start must lie strictly inside.
        name: the name results and errors use (default ``field`` or ``field[index]``).

    Example:
        >>> from diffsim.identification import Parameter
        >>> Parameter("k", start=20.0, lower=0.0).label, Parameter("m", 1).label
        ('k', 'm[1]')
    """

    field: str
    index: int | tuple[int, ...] = ()
    start: float | None = None
    lower: float = -math.inf
    upper: float = math.inf
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name is not None:
            return self.name
        idx = self.index if isinstance(self.index, tuple) else (self.index,)
        return self.field if not idx else f"{self.field}[{','.join(map(str, idx))}]"

    @property
    def kind(self) -> str:
        lo, hi = math.isfinite(self.lower), math.isfinite(self.upper)
        return {(False, False): "free", (True, False): "lower", (False, True): "upper"}.get(
            (lo, hi), "both"
        )


def parse_parameters(
    spec: str | Sequence[str],
    theta: Mapping[str, Any],
    *,
    model: Any = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: Mapping[str, float] | None = None,
) -> tuple[Parameter, ...]:
    """Parameters from names: ``"k"``, ``"m[1]"``, ``"geom_friction[0,0]"`` or, for a MuJoCo
    model, ``"body_mass:box"`` (field, then the element's name; a 2-D field's column 0).

    Args:
        spec: comma-separated names, or a sequence of them.
        theta: the θ they index (a dict of arrays: sets the fields and shapes accepted).
        model: a ``mujoco.MjModel`` to resolve ``field:element`` names (bodies for
            ``body_*``, geoms for ``geom_*``, joints for ``jnt_*`` and ``dof_*``,
            actuators for ``actuator_*``).
        bounds: ``{name: (lower, upper)}`` (``±inf`` for none).
        start: ``{name: value}`` starting values.

    Raises:
        ValueError: an empty spec, an unknown field (the message lists θ's), an element
            name the model lacks (listed), an index outside the field's shape, bounds or
            starts naming no parsed parameter.

    Example:
        >>> import jax.numpy as jnp
        >>> from diffsim.identification import parse_parameters
        >>> theta = {"m": jnp.array([1.0, 1.5]), "k": jnp.array(20.0)}
        >>> [p.label for p in parse_parameters("m[1], k", theta, bounds={"k": (0, 100)})]
        ['m[1]', 'k']
    """
    names = [
        s.strip() for s in (re.split(r",(?![^\[]*\])", spec) if isinstance(spec, str) else spec)
    ]
    names = [s for s in names if s]
    if not names:
        raise ValueError("the parameters to fit must name at least one entry of theta, got none")
    if not isinstance(theta, Mapping):
        raise ValueError(f"theta must be a dict of arrays, got {type(theta).__name__}")
    bounds, start = dict(bounds or {}), dict(start or {})
    out = []
    for text in names:
        m = re.fullmatch(r"([A-Za-z_]\w*)(?::([^\[\]]+))?(?:\[([\d,\s]+)\])?", text)
        if m is None:
            raise ValueError(
                f"parameter {text!r} must read 'field', 'field[i]', 'field[i,j]' or "
                f"'field:element' (a MuJoCo element's name)"
            )
        fld, element, index_text = m.group(1), m.group(2), m.group(3)
        if fld not in theta:
            raise ValueError(
                f"parameter {text!r}: theta has no field {fld!r}; fields: {', '.join(theta)}"
            )
        shape = tuple(np.shape(theta[fld]))
        index: tuple[int, ...] = ()
        if element is not None:
            index = (element_id(model, fld, element.strip(), text),)
        if index_text is not None:
            try:
                index = index + tuple(int(i) for i in index_text.split(","))
            except ValueError:
                raise ValueError(
                    f"parameter {text!r}: the index [{index_text}] must be integers separated "
                    f"by commas, e.g. '{fld}[0]' or '{fld}[1,0]'"
                ) from None
        if len(index) < len(shape):  # a row of a 2-D field: its first column
            if element is None and index_text is None and shape == (1,):
                index = (0,)
            elif element is None and index_text is None:
                raise ValueError(
                    f"parameter {text!r}: theta[{fld!r}] has shape {shape}; name one element, "
                    f"e.g. '{fld}[{','.join('0' * len(shape))}]'"
                )
            else:
                index = index + (0,) * (len(shape) - len(index))
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            raise ValueError(
                f"parameter {text!r}: index {index} is outside theta[{fld!r}]'s shape {shape}"
            )
        lo, hi = bounds.pop(text, (-math.inf, math.inf))
        out.append(Parameter(fld, index, start.pop(text, None), float(lo), float(hi), name=text))
    for what, left in (("bounds", bounds), ("start", start)):
        if left:
            raise ValueError(
                f"{what} name {', '.join(map(repr, left))}, which are not fitted; fitted: "
                f"{', '.join(p.label for p in out)}"
            )
    return tuple(out)


def _to_z(p: Parameter, x: float, scale: float) -> float:
    if p.kind == "free":
        return (x - p.start) / scale if p.start is not None else 0.0  # pragma: no cover
    if p.kind == "lower":
        return math.log(x - p.lower)
    if p.kind == "upper":
        return math.log(p.upper - x)
    u = (x - p.lower) / (p.upper - p.lower)
    return math.log(u / (1 - u))


def _from_z(kind: str, lo: float, hi: float, x0: float, scale: float, z):
    if kind == "free":
        return x0 + scale * z
    if kind == "lower":
        return lo + jnp.exp(z)
    if kind == "upper":
        return hi - jnp.exp(z)
    return lo + (hi - lo) * jax.nn.sigmoid(z)


def _from_z_all(kinds: tuple[str, ...], lo, hi, x0, scale, z):
    """:func:`_from_z` of every parameter at once (vectorised: a fit of thousands traces
    one expression, not one per parameter); each entry is the same expression of its z."""
    k = np.asarray(kinds)
    one_sided = jnp.asarray((k == "lower") | (k == "upper"))
    both = jnp.asarray(k == "both")
    # double where: the exponential and sigmoid see 0 where their branch is not taken, so a
    # free parameter's large z gives no inf (and no NaN gradient) in an unused branch
    e = jnp.exp(jnp.where(one_sided, z, 0.0))
    s = jax.nn.sigmoid(jnp.where(both, z, 0.0))
    out = jnp.where(jnp.asarray(k == "free"), x0 + scale * z, lo + (hi - lo) * s)
    out = jnp.where(jnp.asarray(k == "lower"), lo + e, out)
    return jnp.where(jnp.asarray(k == "upper"), hi - e, out)


def resolve_parameters(
    parameters: str | Sequence[str | Parameter],
    theta: Mapping[str, Any],
    model: Any,
    bounds: Mapping[str, tuple[float, float]] | None,
) -> tuple[Parameter, ...]:
    """The fitted parameters from :func:`diffsim.identify`'s ``parameters`` (objects or
    names), ``theta``, ``model`` and ``bounds``.

    Raises:
        ValueError: no parameters, bounds with :class:`Parameter` objects, a name
            :func:`parse_parameters` rejects, parameters named twice.
    """
    if not isinstance(parameters, str | Sequence) or (
        not isinstance(parameters, str)
        and any(not isinstance(p, str | Parameter) for p in parameters)
    ):
        raise TypeError(
            "parameters must be a string of names ('k, c'), or a sequence of names and "
            f"diffsim.identification.Parameter objects, got {parameters!r}"
        )
    if isinstance(parameters, str) or (parameters and all(isinstance(p, str) for p in parameters)):
        params = parse_parameters(parameters, theta, model=model, bounds=bounds)  # type: ignore[arg-type]
    else:
        if not parameters:
            raise ValueError("parameters must name at least one entry of theta, got none")
        params = tuple(
            p if isinstance(p, Parameter) else parse_parameters([p], theta, model=model)[0]
            for p in parameters
        )
        if bounds:
            raise ValueError("bounds applies to parameters given by name; set Parameter bounds")
    labels = [p.label for p in params]
    if len(set(labels)) != len(labels):
        raise ValueError(f"parameters must be distinct, got {labels}")
    return params


def with_starts(params: Sequence[Parameter], theta: Mapping[str, Any]) -> tuple[Parameter, ...]:
    """``params`` with their starts (given, or read from θ) and bounds checked.

    Raises:
        ValueError: an unknown field or an index outside it, a start that is not finite or
            not strictly inside its bounds, bounds with ``lower >= upper``.
    """
    resolved = []
    for p in params:
        if p.field not in theta:
            raise ValueError(
                f"parameter {p.label!r}: theta has no field {p.field!r}; fields: {', '.join(theta)}"
            )
        try:
            value = float(theta[p.field][p.index]) if p.start is None else float(p.start)
        except (IndexError, TypeError):
            raise ValueError(
                f"parameter {p.label!r}: index {p.index} is outside theta[{p.field!r}]'s shape "
                f"{tuple(theta[p.field].shape)}"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"parameter {p.label!r}: the start must be finite, got {value}")
        if not (p.lower < p.upper) or math.isnan(p.lower) or math.isnan(p.upper):
            raise ValueError(
                f"parameter {p.label!r}: bounds must satisfy lower < upper, got "
                f"({p.lower}, {p.upper})"
            )
        if (
            math.isfinite(p.lower)
            and math.isfinite(p.upper)
            and not math.isfinite(p.upper - p.lower)
        ):  # the two-sided reparametrisation divides by the width
            raise ValueError(
                f"parameter {p.label!r}: bounds ({p.lower:g}, {p.upper:g}) are wider than "
                f"float64 holds (upper - lower overflows); use inf for an unbounded side"
            )
        if not (p.lower < value < p.upper):
            raise ValueError(
                f"parameter {p.label!r}: the start {value:g} must lie strictly inside its "
                f"bounds ({p.lower:g}, {p.upper:g})"
            )
        resolved.append(Parameter(p.field, p.index, value, p.lower, p.upper, p.label))
    return tuple(resolved)
