"""System identification: fit θ so that a simulation reproduces recorded motion.

:func:`diffsim.identify` (the maths: its module, ``diffsim.identification._identify``) and
what it reads and returns: recordings and their files, the fitted parameters, the result,
and the ``trust=`` strategies — :class:`Act` (the default), :class:`Report` and :class:`Off`
— that say what the fit does about the doctor's check of the exact Jacobian. The flat
``diffsim`` namespace re-exports the functions and classes users call; the strategies and
the constants that tune them live here. A strategy's :meth:`AbstractTrust.next_remedy` reads
a ``Finding`` and returns a ``Decision`` (``diffsim.identification._trust``).
"""

from ._files import FILE_SIGNALS as FILE_SIGNALS
from ._files import load_recording as load_recording
from ._files import save_recording as save_recording
from ._identify import identify as identify
from ._matrix_free import CG_MAX_STEPS as CG_MAX_STEPS
from ._matrix_free import DENSE_JACOBIAN_BYTES as DENSE_JACOBIAN_BYTES
from ._matrix_free import FULL_COVARIANCE_MAX as FULL_COVARIANCE_MAX
from ._matrix_free import INTERVAL_CG_MAX_STEPS as INTERVAL_CG_MAX_STEPS
from ._matrix_free import MATRIX_FREE_ABOVE as MATRIX_FREE_ABOVE
from ._matrix_free import NUM_DIRECTIONS as NUM_DIRECTIONS
from ._matrix_free import SOLVERS as SOLVERS
from ._parameters import Parameter as Parameter
from ._parameters import parse_parameters as parse_parameters
from ._problem import SMOOTHING_DRAWS as SMOOTHING_DRAWS
from ._problem import SMOOTHING_SCALE as SMOOTHING_SCALE
from ._recording import Recording as Recording
from ._recording import Signals as Signals
from ._recording import default_observe as default_observe
from ._recording import simulate_recording as simulate_recording
from ._remedies import MIN_AUTO_WINDOW as MIN_AUTO_WINDOW
from ._remedies import NONLINEARITY as NONLINEARITY
from ._remedies import PROBE_GAIN as PROBE_GAIN
from ._remedies import PROBE_RESTARTS as PROBE_RESTARTS
from ._remedies import PROBE_WIDTHS as PROBE_WIDTHS
from ._result import IdentifyResult as IdentifyResult
from ._statistics import CONFIDENCE as CONFIDENCE
from ._statistics import NotIdentifiableError as NotIdentifiableError
from ._trust import TRUST as TRUST
from ._trust import AbstractTrust as AbstractTrust
from ._trust import Act as Act
from ._trust import Off as Off
from ._trust import Report as Report
from ._trust import as_trust as as_trust

__all__ = [
    "CG_MAX_STEPS",
    "CONFIDENCE",
    "DENSE_JACOBIAN_BYTES",
    "FILE_SIGNALS",
    "FULL_COVARIANCE_MAX",
    "INTERVAL_CG_MAX_STEPS",
    "MATRIX_FREE_ABOVE",
    "MIN_AUTO_WINDOW",
    "NONLINEARITY",
    "NUM_DIRECTIONS",
    "PROBE_GAIN",
    "PROBE_RESTARTS",
    "PROBE_WIDTHS",
    "SMOOTHING_DRAWS",
    "SMOOTHING_SCALE",
    "SOLVERS",
    "TRUST",
    "AbstractTrust",
    "Act",
    "IdentifyResult",
    "NotIdentifiableError",
    "Off",
    "Parameter",
    "Recording",
    "Report",
    "Signals",
    "as_trust",
    "default_observe",
    "identify",
    "load_recording",
    "parse_parameters",
    "save_recording",
    "simulate_recording",
]
