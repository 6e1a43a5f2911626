"""Background work (C2): the job runner interface and the in-process runner used by default."""

from .runner import InProcessJobRunner, JobRunner

__all__ = ["InProcessJobRunner", "JobRunner"]
