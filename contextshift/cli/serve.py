"""``contextshift serve``: the chat service on SQLite by default, with nothing to configure."""

from __future__ import annotations

import argparse
import os
from typing import Any

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
        "else a SQLite file in the user data directory)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api.app import create_app
    from ..storage import default_database_url, display_url

    url = args.database or os.environ.get("CONTEXTSHIFT_DATABASE_URL") or default_database_url()
    print(f"contextshift on http://{args.host}:{args.port}  (database: {display_url(url)})", flush=True)
    uvicorn.run(create_app(url), host=args.host, port=args.port, log_level="info")
    return 0
