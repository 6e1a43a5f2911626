"""The service as the wheel installed it, for the browser tests (issue 11: Playwright against the server installed
from the wheel).

Run by ``tests/e2e/conftest.py`` with the interpreter of the virtual environment the wheel was installed into, from
a folder outside the checkout, so ``contextshift`` (code, static files, migrations) comes from the installed
package. It serves the same app as the in-process fixture: the tests' admin token and the short provider timeouts
and retries the fault tests count on. It prints ``listening <port>`` once it accepts connections.

Usage: ``python installed_server.py DATABASE_URL ADMIN_TOKEN CHECKOUT``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvicorn

import contextshift
from contextshift.api.app import create_app
from contextshift.providers import RetryPolicy, Timeouts


def main() -> None:
    database_url, admin_token, checkout = sys.argv[1:4]
    package = Path(contextshift.__file__).resolve()
    if package.is_relative_to(Path(checkout).resolve()):
        sys.exit(f"contextshift was imported from the checkout ({package}), not from the installed wheel")
    options = {
        "timeouts": Timeouts(connect=2.0, read=3.0),
        "retry": RetryPolicy(retries=1, backoff_base=0.01, backoff_max=0.02, retry_after_cap=0.1),
    }
    app = create_app(database_url, client_options=options, admin_token=admin_token)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task
                sys.exit("the installed service stopped while starting")
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"listening {port}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
