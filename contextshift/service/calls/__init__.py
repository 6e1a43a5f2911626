"""Every provider call of the service, in one package.

- :mod:`.limits`: the provider's timeout and the call's total deadline (N5);
- :mod:`.refit`: the one step after a context-length rejection (T5);
- :mod:`.engine`: the call target and the send (complete or stream, the one resend, the client's lifecycle)
  and the recorder protocol each caller's audit or log implements;
- :mod:`.shared`: the one HTTP connection pool the calls share, opened and closed by the app.
"""

from __future__ import annotations

from .engine import Calls, CallTarget, ClientFactory, Plan, Recorder, require_content
from .limits import DEADLINE_FACTOR, Deadline, HasTimeout, call_timeouts, open_client
from .refit import CONTEXT_LENGTH_RETRY, RETRY_GROWTH, RETRY_MARGIN, Refit, Seen, corrected, learn_refit, refit_after
from .shared import SharedClient

__all__ = [
    "CONTEXT_LENGTH_RETRY",
    "DEADLINE_FACTOR",
    "RETRY_GROWTH",
    "RETRY_MARGIN",
    "CallTarget",
    "Calls",
    "ClientFactory",
    "Deadline",
    "HasTimeout",
    "Plan",
    "Recorder",
    "Refit",
    "Seen",
    "SharedClient",
    "call_timeouts",
    "corrected",
    "learn_refit",
    "open_client",
    "refit_after",
    "require_content",
]
