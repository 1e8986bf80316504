"""Contact models, composable with any integrator through :class:`WithContact`.

* :class:`Restitution`: hard impulse :math:`v_n^+ = -e v_n^-`, naive or with time-of-impact
  correction (the impact located on the integrator's own sub-step, :func:`locate_impact`),
  or smoothed with temperature τ;
* :class:`StopDead`: inelastic, sticking contact (the article's wall);
* :class:`PenaltySpring`: stiff spring–damper force, hard or smoothed;
* :class:`SphereContact`: restitution impulses between N spheres (every pair, vectorised),
  naive, with time of impact or smoothed — contact between bodies.

A :class:`Plane` is a half-space (the ground) or, with an :class:`Extent`, a thin obstacle
(``Plane.wall(6.0, height=2.0)``) that contacts meet only where a step crosses it within its
extent.

Examples:
    >>> import jax.numpy as jnp
    >>> from diffsim.contact import IMPACT_ITERATIONS, Coords, where
    >>> IMPACT_ITERATIONS  # Newton iterations of locate_impact after its quadratic guess
    2
    >>> a, b = Coords.split(jnp.array([1.0, 2.0])), Coords.split(jnp.array([5.0, 6.0]))
    >>> [float(c) for c in where(jnp.array(True), a, b).stack()]  # coordinate-wise select
    [1.0, 2.0]
"""

from .._coords import Coords as Coords
from .._coords import where as where
from ._impact import IMPACT_ITERATIONS as IMPACT_ITERATIONS
from ._impact import Impact as Impact
from ._impact import locate_impact as locate_impact
from ._plane import Extent as Extent
from ._plane import Plane as Plane
from ._plane import crossing as crossing
from ._plane import impact_fraction as impact_fraction
from ._spheres import SphereContact as SphereContact
from ._spheres import sphere_impact_fraction as sphere_impact_fraction
from ._switches import naive_contact as naive_contact
from ._switches import smoothed_contact as smoothed_contact
from ._with_contact import WithContact as WithContact
from .base import Contact as Contact
from .base import EventContact as EventContact
from .base import ForceContact as ForceContact
from .base import PlaneEventContact as PlaneEventContact
from .penalty import PenaltySpring as PenaltySpring
from .restitution import Restitution as Restitution
from .stop_dead import StopDead as StopDead

__all__ = [
    "IMPACT_ITERATIONS",
    "Contact",
    "Coords",
    "EventContact",
    "Extent",
    "ForceContact",
    "Impact",
    "PenaltySpring",
    "Plane",
    "PlaneEventContact",
    "Restitution",
    "SphereContact",
    "StopDead",
    "WithContact",
    "crossing",
    "impact_fraction",
    "locate_impact",
    "naive_contact",
    "smoothed_contact",
    "sphere_impact_fraction",
    "where",
]
