"""Contact models, composable with any integrator through :class:`WithContact`.

* :class:`Restitution`: hard impulse :math:`v_n^+ = -e v_n^-`, naive or with time-of-impact
  correction, or smoothed with temperature τ;
* :class:`StopDead`: inelastic, sticking contact (the article's wall);
* :class:`PenaltySpring`: stiff spring–damper force, hard or smoothed.
"""

from .._coords import Coords as Coords
from .._coords import where as where
from .base import Contact as Contact
from .base import EventContact as EventContact
from .base import ForceContact as ForceContact
from .base import Plane as Plane
from .base import WithContact as WithContact
from .base import check_param as check_param
from .base import crossing as crossing
from .base import impact_fraction as impact_fraction
from .base import naive_contact as naive_contact
from .base import param as param
from .base import safe_div as safe_div
from .base import smoothed_contact as smoothed_contact
from .base import with_h as with_h
from .penalty import PenaltySpring as PenaltySpring
from .restitution import Restitution as Restitution
from .stop_dead import StopDead as StopDead

__all__ = [
    "Contact",
    "Coords",
    "EventContact",
    "ForceContact",
    "PenaltySpring",
    "Plane",
    "Restitution",
    "StopDead",
    "WithContact",
    "check_param",
    "crossing",
    "impact_fraction",
    "naive_contact",
    "param",
    "safe_div",
    "smoothed_contact",
    "where",
    "with_h",
]
