"""diffsim: differentiable simulation that stays trustworthy through contact.

A simulator is a step ``s' = f(s, θ)``; a rollout composes it T times. diffsim gives exact
gradients and Jacobians through rollouts — by autodiff and by analytic per-step Jacobians
chained forwards or backwards — and the tools to tell when they can be trusted.

One flat namespace (implementation modules are private) of what a user composes: rollouts,
gradients and Jacobians, ``optimize``, ``diagnose``, ``identify``, the control ``Task`` s and
their results and errors; and the public sub-namespaces ``contact``, ``doctor``,
``estimators``, ``identification``, ``integrators``, ``policies``, ``sharding`` and
``systems`` for the rest. No exported name is also a submodule's name, so
``import diffsim.X`` always means one thing.
"""

from importlib.metadata import PackageNotFoundError, version

from . import contact as contact
from . import doctor as doctor
from . import estimators as estimators
from . import identification as identification
from . import integrators as integrators
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
from ._methods import METHODS as METHODS
from ._methods import Method as Method
from ._optimize import DivergedError as DivergedError
from ._optimize import OptimizeHistory as OptimizeHistory
from ._optimize import OptimizeResult as OptimizeResult
from ._optimize import Schedule as Schedule
from ._optimize import cosine_anneal as cosine_anneal
from ._optimize import default_optimizer as default_optimizer
from ._optimize import optimize as optimize
from ._options import Option as Option
from ._rollout import checkpoint_segments as checkpoint_segments
from ._rollout import rollout as rollout
from ._sigma import DEFAULT_SIGMA as DEFAULT_SIGMA
from ._sigma import Relative as Relative
from ._sigma import sigma_vector as sigma_vector
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
from .identification import Parameter as Parameter
from .identification import Recording as Recording
from .identification import default_observe as default_observe
from .identification import identify as identify
from .identification import load_recording as load_recording
from .identification import parse_parameters as parse_parameters
from .identification import save_recording as save_recording
from .identification import simulate_recording as simulate_recording

try:
    __version__ = version("diffsim-jax")  # the distribution's name (PyPI's "diffsim" is another)
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "DEFAULT_SIGMA",
    "EXTRAS",
    "METHODS",
    "TASKS",
    "AbstractStep",
    "Decide",
    "Decision",
    "Diagnosis",
    "DivergedError",
    "FunctionStep",
    "Gradient",
    "IdentifyResult",
    "Method",
    "MissingExtraError",
    "NotIdentifiableError",
    "OptimizeHistory",
    "OptimizeResult",
    "Option",
    "Parameter",
    "Recording",
    "Relative",
    "Schedule",
    "Task",
    "__version__",
    "adjoint_vjp",
    "as_step",
    "checkpoint_segments",
    "contact",
    "cosine_anneal",
    "default_observe",
    "default_optimizer",
    "diagnose",
    "doctor",
    "enable_compilation_cache",
    "estimators",
    "forward_sensitivity",
    "identification",
    "identify",
    "integrators",
    "load_recording",
    "optimize",
    "parse_parameters",
    "policies",
    "require_extra",
    "robot_task",
    "rollout",
    "rollout_jacobian",
    "save_recording",
    "sharding",
    "sigma_vector",
    "simulate_recording",
    "step_jacobian",
    "systems",
    "value_and_grad",
]
