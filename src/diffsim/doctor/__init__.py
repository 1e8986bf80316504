"""The gradient doctor: can the gradient at θ be trusted, why not, and what to use instead.

* ``_measure.py`` — what it measures: one jitted batch of exact, finite-difference,
  first- and zeroth-order samples, and the rollout Jacobian along the horizon;
* ``_rules.py`` — what it decides: one :class:`Rule` per flag (test, thresholds, evidence,
  advice);
* ``_diagnose.py`` — :func:`diagnose`, :func:`diagnose_rollout`, :func:`check_grad`;
* ``_battery.py`` — the validation battery (with its held-out set) and the presets that
  ``diffsim diagnose --system`` examines, one per registered system
  (:data:`diffsim.systems.SYSTEMS`).
"""

from ._battery import PRESETS as PRESETS
from ._battery import Case as Case
from ._battery import Check as Check
from ._battery import Preset as Preset
from ._battery import battery_table as battery_table
from ._battery import cases as cases
from ._battery import check_problem as check_problem
from ._battery import held_out_cases as held_out_cases
from ._battery import run_battery as run_battery
from ._diagnose import VERDICTS as VERDICTS
from ._diagnose import Diagnosis as Diagnosis
from ._diagnose import GradCheck as GradCheck
from ._diagnose import HalfStep as HalfStep
from ._diagnose import check_grad as check_grad
from ._diagnose import cost_text as cost_text
from ._diagnose import diagnose as diagnose
from ._diagnose import diagnose_rollout as diagnose_rollout
from ._measure import Discretization as Discretization
from ._measure import Horizon as Horizon
from ._measure import Measurements as Measurements
from ._measure import Sampler as Sampler
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
    "PRESETS",
    "RULES",
    "VERDICTS",
    "Case",
    "Check",
    "Diagnosis",
    "Discretization",
    "Flag",
    "GradCheck",
    "HalfStep",
    "Horizon",
    "Measurements",
    "Preset",
    "Rule",
    "Sampler",
    "Thresholds",
    "battery_table",
    "cases",
    "check_grad",
    "check_problem",
    "cost_text",
    "default_sigma",
    "diagnose",
    "diagnose_rollout",
    "held_out_cases",
    "measure",
    "recommend",
    "run_battery",
]
