"""``contextshift token create [--user NAME]``: print a new API token, for whoever lost theirs (N2).

It opens the service's database directly (the same ``--database`` / ``CONTEXTSHIFT_DATABASE_URL`` / data
directory as ``serve``), so it works with the service running or not. The sign-in URL it prints is, in order:
``--host``/``--port`` when given; else the address ``serve`` last listened on for the same database (recorded in
the data directory); else the default address. It says which. Exit codes: 0 made, 2 no such user.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from ..settings import Settings
from .serve import ADDRESS_FILE, DEFAULT_HOST, DEFAULT_PORT, base_url, recorded_address

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("token", help="make API tokens", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="print a new token for a user (the first admin by default)")
    create.add_argument("--user", default=None, help="the user's name (default: the first admin)")
    create.add_argument("--name", default="command line", help="what the token is for")
    create.add_argument("--database", default=None, help="database URL (default: as for `contextshift serve`)")
    create.add_argument(
        "--host", default=None, help="host of the sign-in URL (default: where `serve` last listened, else 127.0.0.1)"
    )
    create.add_argument(
        "--port", type=int, default=None, help=f"port of the sign-in URL (default: as --host, else {DEFAULT_PORT})"
    )
    create.set_defaults(run=run)


async def _create(url: str, user: str | None, name: str, settings: Settings) -> tuple[str, str]:
    from ..service.accounts import create_token
    from ..storage.configured import configured_database

    db = configured_database(settings, url, instance=False)
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
    try:
        settings = Settings.from_env()  # read once
    except ValueError as error:
        print(f"contextshift token: {error}", file=err)
        return EXIT_BAD_INPUT
    url = args.database or settings.database_url or default_database_url(settings.data_dir)
    try:
        user, secret = asyncio.run(_create(url, args.user, args.name, settings))
    except ServiceError as error:
        print(f"{error.code}: {error.message}", file=err)
        return EXIT_BAD_INPUT
    address, source = sign_in_address(args.host, args.port, url, settings.data_dir)
    print(f"a new token for {user} (shown once):\n{secret}", file=out)
    print(f"sign in: {address}/?token={secret}", file=out)
    print(f"  ({source})", file=out)
    return EXIT_OK


def sign_in_address(
    host: str | None, port: int | None, database: str, directory_setting: str | None = None
) -> tuple[str, str]:
    """The service's base URL for the sign-in link, and where it comes from (said to the user);
    ``directory_setting``: ``CONTEXTSHIFT_DATA_DIR``, where ``serve`` recorded its address."""
    from ..storage import display_url
    from ..storage.urls import data_dir

    if host is not None or port is not None:
        return base_url(host or DEFAULT_HOST, port or DEFAULT_PORT), "address from --host/--port"
    directory = data_dir(directory_setting)
    recorded = recorded_address(directory, display_url(database))
    if recorded is not None:
        return recorded, f"the address `contextshift serve` last listened on, recorded in {directory / ADDRESS_FILE}"
    return (
        base_url(DEFAULT_HOST, DEFAULT_PORT),
        "the default address: no `contextshift serve` of this database recorded one; give --host/--port if the "
        "service listens elsewhere",
    )
