"""``python -m tests.fakes``: the fake provider in a process of its own (the endpoint benchmark's upstream).

Prints its port on the first line, then serves until its standard input closes.
"""

from __future__ import annotations

import sys

from .server import FakeProvider

if __name__ == "__main__":
    with FakeProvider() as fake:
        print(fake.port, flush=True)
        sys.stdin.read()
