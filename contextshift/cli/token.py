"""``contextshift token create [--user NAME]``: print a new API token, for whoever lost theirs (N2).

It opens the service's database directly (the same ``--database`` / ``CONTEXTSHIFT_DATABASE_URL`` / data
directory as ``serve``), so it works with the service running or not. Exit codes: 0 made, 2 no such user.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, TextIO

from .serve import DEFAULT_HOST, DEFAULT_PORT, base_url

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("token", help="make API tokens", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="print a new token for a user (the first admin by default)")
    create.add_argument("--user", default=None, help="the user's name (default: the first admin)")
    create.add_argument("--name", default="command line", help="what the token is for")
    create.add_argument("--database", default=None, help="database URL (default: as for `contextshift serve`)")
    create.add_argument("--host", default=DEFAULT_HOST, help="host of the login URL printed")
    create.add_argument("--port", type=int, default=DEFAULT_PORT, help="port of the login URL printed")
    create.set_defaults(run=run)


async def _create(url: str, user: str | None, name: str) -> tuple[str, str]:
    from ..service.accounts import create_token
    from ..storage import Database

    db = Database(url)
    await db.start()
    try:
        return await create_token(db, user, name=name)
    finally:
        await db.close()


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ..service.errors import ServiceError
    from ..storage import default_database_url

    out = out or sys.stdout
    err = err or sys.stderr
    url = args.database or os.environ.get("CONTEXTSHIFT_DATABASE_URL") or default_database_url()
    try:
        user, secret = asyncio.run(_create(url, args.user, args.name))
    except ServiceError as error:
        print(f"{error.code}: {error.message}", file=err)
        return EXIT_BAD_INPUT
    print(f"a new token for {user} (shown once):\n{secret}", file=out)
    print(f"sign in: {base_url(args.host, args.port)}/?token={secret}", file=out)
    return EXIT_OK
