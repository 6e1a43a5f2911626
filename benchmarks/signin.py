"""How the benchmarks sign in to the service they start (authentication is always on): one admin token."""

from __future__ import annotations

import secrets

#: A fresh admin token per benchmark run, given to ``create_app(admin_token=...)``.
BENCH_TOKEN = "cs_bench-" + secrets.token_urlsafe(24)
BENCH_HEADERS = {"Authorization": f"Bearer {BENCH_TOKEN}"}
