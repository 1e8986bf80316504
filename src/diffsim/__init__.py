"""diffsim: differentiable simulation that stays trustworthy through contact.

A simulator is a step ``s' = f(s, θ)``; a rollout composes it T times. diffsim gives exact
gradients and Jacobians through rollouts — by autodiff and by analytic per-step Jacobians
chained forwards or backwards — and the tools to tell when they can be trusted.

One flat namespace (implementation modules are private) of what a user composes: rollouts,
gradients and Jacobians, ``optimize``, ``diagnose``, ``identify``, the control ``Task`` s and
their results and errors; and the public sub-namespaces ``contact``, ``doctor``,
``estimators`` (with σ: ``Relative``, ``DEFAULT_SIGMA``), ``identification`` (recordings'
parts, ``Parameter``), ``integrators``, ``optimization`` (named methods, schedules, the
default optimizer), ``policies``, ``sharding`` and ``systems`` for the rest. No exported
name is also a submodule's name, so ``import diffsim.X`` always means one thing.
"""

from importlib.metadata import PackageNotFoundError, version

from . import contact as contact
from . import doctor as doctor
from . import estimators as estimators
from . import identification as identification
from . import integrators as integrators
from . import optimization as optimization
from . import policies as policies
from . import sharding as sharding
from . import systems as systems
from ._cache import enable_compilation_cache as enable_compilation_cache
from ._decide import Decide as Decide
from ._decide import Decision as Decision
from ._extras import EXTRAS as EXTRAS
from ._extras import MissingExtraError as MissingExtraError
from ._extras import require_extra as require_extra
from ._grad import Gradient as Gradient
from ._grad import value_and_grad as value_and_grad
from ._jacobians import adjoint_vjp as adjoint_vjp
from ._jacobians import forward_sensitivity as forward_sensitivity
from ._jacobians import rollout_jacobian as rollout_jacobian
from ._jacobians import step_jacobian as step_jacobian
from ._optimize import DivergedError as DivergedError
from ._optimize import OptimizeResult as OptimizeResult
from ._optimize import optimize as optimize
from ._results import RESULTS as RESULTS
from ._rollout import checkpoint_segments as checkpoint_segments
from ._rollout import rollout as rollout
from ._step import AbstractStep as AbstractStep
from ._step import FunctionStep as FunctionStep
from ._step import as_step as as_step
from ._tasks import TASKS as TASKS
from ._tasks import Task as Task
from ._tasks import robot_task as robot_task
from .doctor import Diagnosis as Diagnosis
from .doctor import diagnose as diagnose
from .identification import IdentifyResult as IdentifyResult
from .identification import NotIdentifiableError as NotIdentifiableError
from .identification import Recording as Recording
from .identification import identify as identify
from .identification import load_recording as load_recording
from .identification import save_recording as save_recording

try:
    __version__ = version("diffsim-jax")  # the distribution's name (PyPI's "diffsim" is another)
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "EXTRAS",
    "RESULTS",
    "TASKS",
    "AbstractStep",
    "Decide",
    "Decision",
    "Diagnosis",
    "DivergedError",
    "FunctionStep",
    "Gradient",
    "IdentifyResult",
    "MissingExtraError",
    "NotIdentifiableError",
    "OptimizeResult",
    "Recording",
    "Task",
    "__version__",
    "adjoint_vjp",
    "as_step",
    "checkpoint_segments",
    "contact",
    "diagnose",
    "doctor",
    "enable_compilation_cache",
    "estimators",
    "forward_sensitivity",
    "identification",
    "identify",
    "integrators",
    "load_recording",
    "optimization",
    "optimize",
    "policies",
    "require_extra",
    "robot_task",
    "rollout",
    "rollout_jacobian",
    "save_recording",
    "sharding",
    "step_jacobian",
    "systems",
    "value_and_grad",
]
