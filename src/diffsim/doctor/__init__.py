"""The gradient doctor: can the gradient at θ be trusted, why not, and what to use instead.

* ``_measure.py`` — what it measures: the evidence ``auto`` decides on, drawn in rounds by
  the same rule (:mod:`diffsim.estimators._rounds`), as numbers (:class:`Measurements`:
  the evidence plus σ as sampled, the cost and a rollout's checks), and the rollout
  Jacobian along the horizon;
* ``_rules.py`` — what it decides: one :class:`Rule` per flag (test, thresholds, evidence,
  advice);
* ``_diagnose.py`` — :func:`diagnose`, :func:`diagnose_rollout`, :func:`check_grad`.

The doctor knows no system: its validation battery and the presets ``diffsim diagnose
--system`` examines are in the catalogue above it, :mod:`diffsim.systems.battery`.
"""

from ._diagnose import VERDICTS as VERDICTS
from ._diagnose import Diagnosis as Diagnosis
from ._diagnose import GradCheck as GradCheck
from ._diagnose import HalfStep as HalfStep
from ._diagnose import check_grad as check_grad
from ._diagnose import diagnose as diagnose
from ._diagnose import diagnose_rollout as diagnose_rollout
from ._measure import Discretization as Discretization
from ._measure import Horizon as Horizon
from ._measure import Measurements as Measurements
from ._measure import default_sigma as default_sigma
from ._measure import measure as measure
from ._rules import FLAGS as FLAGS
from ._rules import RULES as RULES
from ._rules import Flag as Flag
from ._rules import Rule as Rule
from ._rules import Thresholds as Thresholds
from ._rules import recommend as recommend

__all__ = [
    "FLAGS",
    "RULES",
    "VERDICTS",
    "Diagnosis",
    "Discretization",
    "Flag",
    "GradCheck",
    "HalfStep",
    "Horizon",
    "Measurements",
    "Rule",
    "Thresholds",
    "check_grad",
    "default_sigma",
    "diagnose",
    "diagnose_rollout",
    "measure",
    "recommend",
]
