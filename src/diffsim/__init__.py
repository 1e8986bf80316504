"""diffsim: differentiable simulation that stays trustworthy through contact.

A simulator is a step ``s' = f(s, θ)``; a rollout composes it T times. diffsim gives exact
gradients and Jacobians through rollouts — by autodiff and by analytic per-step Jacobians
chained forwards or backwards — and the tools to tell when they can be trusted.
"""

from importlib.metadata import PackageNotFoundError, version

from . import contact as contact
from . import estimators as estimators
from . import integrators as integrators
from . import systems as systems
from ._grad import Gradient as Gradient
from ._grad import value_and_grad as value_and_grad
from ._jacobians import adjoint_vjp as adjoint_vjp
from ._jacobians import forward_sensitivity as forward_sensitivity
from ._jacobians import rollout_jacobian as rollout_jacobian
from ._jacobians import step_jacobian as step_jacobian
from ._rollout import checkpoint_segments as checkpoint_segments
from ._rollout import rollout as rollout
from .doctor import Diagnosis as Diagnosis
from .doctor import GradCheck as GradCheck
from .doctor import check_grad as check_grad
from .doctor import diagnose as diagnose
from .doctor import diagnose_rollout as diagnose_rollout
from .optimize import OptimizeResult as OptimizeResult
from .optimize import optimize as optimize

try:
    __version__ = version("diffsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "Diagnosis",
    "GradCheck",
    "Gradient",
    "OptimizeResult",
    "__version__",
    "adjoint_vjp",
    "check_grad",
    "checkpoint_segments",
    "contact",
    "diagnose",
    "diagnose_rollout",
    "estimators",
    "forward_sensitivity",
    "integrators",
    "optimize",
    "rollout",
    "rollout_jacobian",
    "step_jacobian",
    "systems",
    "value_and_grad",
]
