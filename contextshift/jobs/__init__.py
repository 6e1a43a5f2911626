"""Background work (V8): the job definitions, once each, and two runners of them.

On PostgreSQL the job engine (procrastinate, ``engine``) runs them, in ``contextshift worker`` processes or inside
``contextshift serve``; on SQLite the embedded runner (``local``) does, inside ``serve``. ``make_runner`` chooses.
"""

from .definitions import COMPACTION_PASS, JOBS, Backoff, ChatBusy, Job, JobContext, JobError
from .runner import JobRunner, make_runner
from .views import AttemptView, JobView

__all__ = [
    "COMPACTION_PASS",
    "JOBS",
    "AttemptView",
    "Backoff",
    "ChatBusy",
    "Job",
    "JobContext",
    "JobError",
    "JobRunner",
    "JobView",
    "make_runner",
]
