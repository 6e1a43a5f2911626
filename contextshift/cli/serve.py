"""``contextshift serve``: the chat service on SQLite by default, with nothing to configure.

The first start creates an admin and prints a login URL with its token, once (only the token's hash is kept);
``contextshift token create`` makes a new one.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..core.errors import ContextShiftError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "serve",
        help="run the chat service (SQLite in your data directory unless --database or CONTEXTSHIFT_DATABASE_URL)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"interface to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--database",
        default=None,
        help="database URL: sqlite:///path.db or postgresql://user@host/db (default: CONTEXTSHIFT_DATABASE_URL, "
        "else a SQLite file in the data directory, CONTEXTSHIFT_DATA_DIR or the user data directory)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the service also answers to (repeatable; also CONTEXTSHIFT_ALLOWED_HOSTS, "
        "comma-separated); loopback names and the bound address always work",
    )
    parser.add_argument(
        "--no-jobs",
        action="store_true",
        help="only queue background jobs (compaction passes, clean-ups); `contextshift worker` runs them",
    )
    parser.set_defaults(run=run)


def base_url(host: str, port: int) -> str:
    """The address a browser on this machine opens: a wildcard bind is reached on 127.0.0.1."""
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def startup_line(url: str, database: str, secret: str | None) -> str:
    """What ``serve`` prints once it is up: the login URL when a token was just made, else where to get one."""
    if secret is not None:
        return f"contextshift on {url}  (database: {database})\n  sign in: {url}/?token={secret}"
    return (
        f"contextshift on {url}  (database: {database})\n"
        "  sign in with your token; `contextshift token create` prints a new one"
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api.app import create_app
    from ..api.guard import allowed_hosts_from_env
    from ..api.protocol import EnvelopeH11Protocol
    from ..service.accounts import Bootstrap
    from ..storage import default_database_url, display_url

    url = args.database or os.environ.get("CONTEXTSHIFT_DATABASE_URL") or default_database_url()
    address = base_url(args.host, args.port)

    def announce(started: Bootstrap) -> None:
        print(startup_line(address, display_url(url), started.secret), flush=True)

    try:
        app = create_app(
            url,
            on_started=announce,
            allowed_hosts=[*allowed_hosts_from_env(), *args.allowed_host],
            bound_host=args.host,
            run_jobs=not args.no_jobs,
        )
    except ContextShiftError as error:  # a setting names something this installation lacks
        print(f"contextshift serve: {error.code}: {error.message}", file=sys.stderr)
        return 2
    # h11 with uvicorn's own refusals of malformed HTTP in the error envelope (api/protocol.py)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", http=EnvelopeH11Protocol)
    return 0
