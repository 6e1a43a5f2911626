"""``GET /healthz`` (V8): open to all; says whether the database answers and which job runners beat lately.

A load balancer takes an instance out on 503 (the database does not answer it). ``workers`` lists the live
instances that run jobs (``contextshift worker`` processes, and plain ``serve``), each with its last heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from .. import __version__
from ..jobs import JobRunner
from ..storage import Database
from ..storage.liveness import InstanceRepository

log = logging.getLogger("contextshift.api")

#: Seconds the health check waits for the database before it answers 503.
DATABASE_CHECK_SECONDS = 5.0


class WorkerHealth(BaseModel):
    instance_id: str
    role: Literal["api+jobs", "worker"] = Field(description="``api+jobs``: a plain ``serve``; ``worker``: a worker")
    last_heartbeat: datetime


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    version: str
    database: str = Field(description="The database URL, its password masked")
    database_status: Literal["ok", "unavailable"]
    instance_id: str
    role: Literal["api", "api+jobs"] = Field(description="``api``: ``serve --no-jobs``, which only queues jobs")
    jobs: Literal["procrastinate", "local"] = Field(
        description="The job runner: the job engine on PostgreSQL, the embedded runner on SQLite"
    )
    workers: list[WorkerHealth] = Field(description="Live instances that run jobs, newest first")


def install_health(app: FastAPI, db: Database, runner: JobRunner) -> None:
    """``GET /healthz`` on ``app``: ``db`` answers (or not) and ``runner``'s live workers."""

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["service"],
        # the refusals in front of every route are added to the document by ``refusals.add_refusals``
        responses={503: {"model": Health, "description": "The database does not answer (``database_status``)"}},
    )
    async def healthz() -> Any:
        workers: list[WorkerHealth] = []
        try:
            async with asyncio.timeout(DATABASE_CHECK_SECONDS), db.session(write=False) as session:
                live = await InstanceRepository(session).live(db.heartbeat.expiry)
            workers = [
                WorkerHealth(instance_id=row.id, role=row.role, last_heartbeat=row.heartbeat_at)  # type: ignore[arg-type]
                for row in live
                if row.role in ("api+jobs", "worker")
            ]
            reachable = True
        except Exception as error:  # any failure to read is "unavailable"; its text may hold connection details
            log.warning("health check: the database did not answer (%s)", type(error).__name__)
            reachable = False
        health = Health(
            status="ok" if reachable else "unavailable",
            version=__version__,
            database=db.display_url,
            database_status="ok" if reachable else "unavailable",
            instance_id=db.instance_id,
            role="api+jobs" if runner.run_jobs else "api",
            jobs="procrastinate" if runner.kind == "procrastinate" else "local",
            workers=workers,
        )
        if not reachable:
            return JSONResponse(health.model_dump(mode="json"), status_code=503)
        return health
