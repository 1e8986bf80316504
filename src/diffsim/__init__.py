"""diffsim: differentiable simulation that stays trustworthy through contact.

A simulator is a step ``s' = f(s, θ)``; a rollout composes it T times. diffsim gives exact
gradients and Jacobians through rollouts — by autodiff and by analytic per-step Jacobians
chained forwards or backwards — and the tools to tell when they can be trusted.

One flat namespace (implementation modules are private) of what a user composes: rollouts,
gradients and Jacobians, ``optimize``, ``diagnose``, ``identify``, the control ``Task`` s and
their results and errors; and the public sub-namespaces ``contact``, ``doctor``,
``estimators``, ``integrators``, ``policies``, ``sharding`` and ``systems`` for the rest. No
exported name is also a submodule's name, so ``import diffsim.X`` always means one thing.
"""

from importlib.metadata import PackageNotFoundError, version

from . import contact as contact
from . import doctor as doctor
from . import estimators as estimators
from . import integrators as integrators
from . import policies as policies
from . import sharding as sharding
from . import systems as systems
from ._extras import EXTRAS as EXTRAS
from ._extras import MissingExtraError as MissingExtraError
from ._extras import require_extra as require_extra
from ._grad import Gradient as Gradient
from ._grad import value_and_grad as value_and_grad
from ._identify import IdentifyResult as IdentifyResult
from ._identify import NotIdentifiableError as NotIdentifiableError
from ._identify import Parameter as Parameter
from ._identify import Recording as Recording
from ._identify import default_observe as default_observe
from ._identify import identify as identify
from ._identify import load_recording as load_recording
from ._identify import parse_parameters as parse_parameters
from ._identify import save_recording as save_recording
from ._identify import simulate_recording as simulate_recording
from ._jacobians import adjoint_vjp as adjoint_vjp
from ._jacobians import forward_sensitivity as forward_sensitivity
from ._jacobians import rollout_jacobian as rollout_jacobian
from ._jacobians import step_jacobian as step_jacobian
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
from ._tasks import TASKS as TASKS
from ._tasks import Task as Task
from .doctor import Diagnosis as Diagnosis
from .doctor import diagnose as diagnose

try:
    __version__ = version("diffsim-jax")  # the distribution's name (PyPI's "diffsim" is another)
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "DEFAULT_SIGMA",
    "EXTRAS",
    "TASKS",
    "Diagnosis",
    "DivergedError",
    "Gradient",
    "IdentifyResult",
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
    "checkpoint_segments",
    "contact",
    "cosine_anneal",
    "default_observe",
    "default_optimizer",
    "diagnose",
    "doctor",
    "estimators",
    "forward_sensitivity",
    "identify",
    "integrators",
    "load_recording",
    "optimize",
    "parse_parameters",
    "policies",
    "require_extra",
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
