"""Contact models, composable with any integrator through :class:`WithContact`.

* :class:`Restitution`: hard impulse :math:`v_n^+ = -e v_n^-`, naive or with time-of-impact
  correction, or smoothed with temperature τ;
* :class:`StopDead`: inelastic, sticking contact (the article's wall);
* :class:`PenaltySpring`: stiff spring–damper force, hard or smoothed.
"""

from .base import Contact as Contact
from .base import EventContact as EventContact
from .base import ForceContact as ForceContact
from .base import Plane as Plane
from .base import WithContact as WithContact
from .base import impact_fraction as impact_fraction
from .base import safe_div as safe_div
from .penalty import PenaltySpring as PenaltySpring
from .restitution import Restitution as Restitution
from .stop_dead import StopDead as StopDead

__all__ = [
    "Contact",
    "EventContact",
    "ForceContact",
    "PenaltySpring",
    "Plane",
    "Restitution",
    "StopDead",
    "WithContact",
    "impact_fraction",
    "safe_div",
]
