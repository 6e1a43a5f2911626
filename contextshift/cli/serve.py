"""``contextshift serve``: the chat service on SQLite by default, with nothing to configure.

The first start creates an admin and prints a login URL with its token, once (only the token's hash is kept);
``contextshift token create`` makes a new one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..core.errors import ContextShiftError
from ..settings import Settings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8700
#: The proxies whose forwarded headers are believed, when ``--forwarded-allow-ips`` is not given.
FORWARDED_ALLOW_IPS_ENV = "CONTEXTSHIFT_FORWARDED_ALLOW_IPS"


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
        "--forwarded-allow-ips",
        default=None,
        metavar="ADDRESSES",
        help="comma-separated addresses (or networks, or *) of the proxies whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed (also CONTEXTSHIFT_FORWARDED_ALLOW_IPS); default none: the peer "
        "address is the client's, whatever the headers say",
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


#: Where ``serve`` records the address it listens on, in the data directory, for ``token create``'s URL.
ADDRESS_FILE = "serve-address.json"


def record_address(directory: Path, address: str, database: str) -> None:
    """Write where this ``serve`` listens and for which database (``token create`` reads it back)."""
    target = directory / ADDRESS_FILE
    partial = target.with_suffix(".tmp")
    partial.write_text(json.dumps({"url": address, "database": database}), encoding="utf-8")
    partial.replace(target)


def recorded_address(directory: Path, database: str) -> str | None:
    """The address the last ``serve`` of ``database`` listened on, or None (none recorded, or another database)."""
    try:
        recorded = json.loads((directory / ADDRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("database") != database:
        return None
    url = recorded.get("url")
    return url if isinstance(url, str) else None


def startup_line(url: str, database: str, secret: str | None) -> str:
    """What ``serve`` prints once it is up: the login URL when a token was just made, else where to get one."""
    if secret is not None:
        return f"contextshift on {url}  (database: {database})\n  sign in: {url}/?token={secret}"
    return (
        f"contextshift on {url}  (database: {database})\n"
        "  sign in with your token; `contextshift token create` prints a new one"
    )


def proxy_options(flag: str | None, configured: str | None = None) -> dict[str, Any]:
    """uvicorn's options for forwarded headers (N2): believed only from the proxies named by ``flag`` or
    ``CONTEXTSHIFT_FORWARDED_ALLOW_IPS``; with neither, not at all (uvicorn alone would believe any client on
    127.0.0.1, so a local client could pick its own address for the sign-in limit).

    Args:
        flag: ``--forwarded-allow-ips``, or None when it was not given.
        configured: ``CONTEXTSHIFT_FORWARDED_ALLOW_IPS`` from the settings (default: read from the environment).

    Returns:
        ``proxy_headers`` and ``forwarded_allow_ips`` for ``uvicorn.run``.
    """
    if configured is None:
        configured = Settings.from_env().forwarded_allow_ips
    value = flag if flag is not None else configured or ""
    trusted = ",".join(part.strip() for part in value.split(",") if part.strip())
    if not trusted:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": trusted}


def secure_data_dir(configured: str | None = None) -> Path:
    """The data directory (``configured``: ``CONTEXTSHIFT_DATA_DIR``, else the user's), made readable by its
    owner only (0700): it holds the SQLite file and the encryption key. ``data_dir`` creates a missing one with
    0700; one that was found with wider permissions (e.g. 0755, made by hand or by an older version) is narrowed
    here, at each ``serve`` start. One that is not ours is left as its owner set it.

    Returns:
        The directory.
    """
    from ..storage.urls import data_dir

    directory = data_dir(configured)
    try:
        if directory.stat().st_mode & 0o077:
            directory.chmod(0o700)
    except PermissionError:
        pass
    return directory


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api.app import create_app
    from ..api.protocol import EnvelopeH11Protocol
    from ..service.accounts import Bootstrap
    from ..storage import default_database_url, display_url

    try:
        settings = Settings.from_env()  # read once; create_app and uvicorn get what they need from it
    except ValueError as error:
        print(f"contextshift serve: {error}", file=sys.stderr)
        return 2
    directory = secure_data_dir(settings.data_dir)
    url = args.database or settings.database_url or default_database_url(settings.data_dir)
    address = base_url(args.host, args.port)

    def announce(started: Bootstrap) -> None:
        try:
            record_address(directory, address, display_url(url))
        except OSError as error:  # a read-only data directory: token create falls back to its default
            print(f"contextshift serve: cannot record the address in {directory}: {error}", file=sys.stderr)
        print(startup_line(address, display_url(url), started.secret), flush=True)

    try:
        app = create_app(
            url,
            on_started=announce,
            allowed_hosts=[*settings.allowed_hosts, *args.allowed_host],
            bound_host=args.host,
            run_jobs=not args.no_jobs,
            settings=settings,
        )
    except ContextShiftError as error:  # a setting names something this installation lacks
        print(f"contextshift serve: {error.code}: {error.message}", file=sys.stderr)
        return 2
    # h11 with uvicorn's own refusals of malformed HTTP in the error envelope (api/protocol.py)
    proxies = proxy_options(getattr(args, "forwarded_allow_ips", None), settings.forwarded_allow_ips or "")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", http=EnvelopeH11Protocol, **proxies)
    return 0
