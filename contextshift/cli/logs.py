"""Structured log lines for ``contextshift worker`` (V8): one JSON object a line, on standard error.

Each line has ``time``, ``level``, ``logger`` and ``message``, and the fields a job's log record carries
(``event``, ``job_id``, ``task``, ``attempt``, ``error_code``, ``retry_in``, ``duration_ms``, ...), so a log
collector can filter on them without parsing the message.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

#: The fields contextshift's records add (procrastinate's records add others; those stay out of our lines).
FIELDS = (
    "event",
    "runner",
    "job_id",
    "task",
    "attempt",
    "status",
    "error_code",
    "retry_in",
    "duration_ms",
    "instance_id",
    "concurrency",
    "database",
)


#: Loggers of libraries whose INFO records are not the worker's story.
QUIET = ("procrastinate", "httpx", "httpcore", "alembic", "psycopg", "asyncio")


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["error_type"] = record.exc_info[0].__name__  # the type only: its text may quote a provider (N2)
        return json.dumps(line, ensure_ascii=False, default=str)


def log_json_lines(level: int = logging.INFO) -> None:
    """Send every log record at ``level`` or above to standard error as JSON lines. Libraries' records come only from
    WARNING: ours say what each job did, and httpx's request lines would name provider URLs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for library in QUIET:
        logging.getLogger(library).setLevel(logging.WARNING)
