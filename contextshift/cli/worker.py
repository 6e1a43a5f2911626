"""``contextshift worker``: run background jobs (V8) beside API instances started with ``serve --no-jobs``.

On PostgreSQL it is a worker of the job engine: any number of them share the queue, each running
``--concurrency`` jobs at once. On SQLite it runs the embedded runner against the file. It logs JSON lines on
standard error, beats like every instance (``GET /healthz`` lists it with its last heartbeat), and on SIGTERM or
SIGINT takes no new job, lets the running ones finish, and exits 0; a second signal stops it at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from ..settings import Settings

log = logging.getLogger("contextshift.worker")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "worker",
        help="run background jobs (compaction passes, clean-ups) for API instances started with --no-jobs",
        description=__doc__,
    )
    parser.add_argument(
        "--database",
        default=None,
        help="database URL, the API instances' one (default: CONTEXTSHIFT_DATABASE_URL, else as for `serve`)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="jobs run at once (default 1)")
    parser.set_defaults(run=run)


async def work(
    url: str, concurrency: int, *, stop: asyncio.Event | None = None, settings: Settings | None = None
) -> int:
    """Run jobs until ``stop`` is set (or a signal sets it), then let running jobs finish; ``settings``: the
    ``CONTEXTSHIFT_*`` settings (default: none set)."""
    from ..jobs import make_runner
    from ..service.calls import SharedClient
    from ..service.compaction import Compactor
    from ..service.rules import Rules
    from ..storage.configured import configured_database

    settings = settings if settings is not None else Settings()
    stop = stop or asyncio.Event()
    db = configured_database(settings, url)
    db.heartbeat.role = "worker"
    await db.start()
    shared = SharedClient()  # one connection pool for every summarizer call
    shared.open()
    rules = Rules.from_settings(settings, embeddings=False)  # the provider hosts a pass may call, the margin
    compactor = Compactor(db, shared_client=shared, rules=rules, sync_wait=settings.compaction_wait_seconds)
    runner = make_runner(db, compactor, concurrency=concurrency, grace=None)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal(number: int) -> None:
        if stop.is_set():  # the second signal: stop now
            log.warning("signal %d again: stopping now", number, extra={"event": "worker_stopping_now"})
            if main is not None:
                main.cancel()
            return
        log.info("signal %d: finishing running jobs, then stopping", number, extra={"event": "worker_stopping"})
        stop.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, on_signal, number)
    code = EXIT_OK
    try:
        await runner.start()
        log.info(
            "worker %s on %s (%s), concurrency %d",
            db.instance_id,
            db.display_url,
            runner.kind,
            concurrency,
            extra={
                "event": "worker_started",
                "instance_id": db.instance_id,
                "runner": runner.kind,
                "concurrency": concurrency,
                "database": db.display_url,
            },
        )
        stopping = asyncio.create_task(stop.wait())
        ended = asyncio.create_task(runner.wait())
        await asyncio.wait({stopping, ended}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            log.error("the job runner stopped on its own", extra={"event": "worker_failed"})
            code = EXIT_FAILED
        stopping.cancel()
        ended.cancel()
        await runner.stop()
        log.info("worker %s stopped", db.instance_id, extra={"event": "worker_stopped", "instance_id": db.instance_id})
    finally:
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(number)
        with contextlib.suppress(Exception):
            await shared.aclose()
        await db.close()
    return code


def run(args: argparse.Namespace) -> int:
    from ..storage import default_database_url
    from .logs import log_json_lines

    if args.concurrency < 1:
        print("--concurrency must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        settings = Settings.from_env()  # read once
    except ValueError as error:
        print(f"contextshift worker: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    log_json_lines()
    url = args.database or settings.database_url or default_database_url(settings.data_dir)
    try:
        return asyncio.run(work(url, args.concurrency, settings=settings))
    except asyncio.CancelledError:  # a second signal
        return EXIT_FAILED
