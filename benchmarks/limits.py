"""Benchmark: the service's memory (RSS) over repeated large requests to ``/v1`` (N6, issue 25 point 1).

Run from the project root:

    .venv/bin/python -m benchmarks.limits           # 8 in a row and 4 at once per kind -> benchmarks/results/limits.md
    .venv/bin/python -m benchmarks.limits --quick   # CI smoke (3 in a row, 2 at once), writes nothing by default

What it does: starts the fake OpenAI-compatible provider of ``tests/fakes`` in a process of its own and the
service as ``contextshift serve`` on a fresh SQLite file (a real server process, whose RSS is read from
``/proc/{pid}/status``), makes a provider on the fake and the model ``gpt-4o`` with a 128,000-token window, and
then sends, per kind, requests in a row and then several at once, reading the server's RSS after each:

* *attack*: the issue's request, 200,000 one-character messages (6 MB here, 6.6 MB in the issue): refused
  from its bytes (413 ``TOO_MANY_PARTS``) before it becomes objects. Before N6 each one added about 800 MiB
  that was not given back.
* *largest accepted*: ``MAX_MESSAGES`` (10,000) short messages, fitted and forwarded: 200.
* *near the byte limit*: ``MAX_MESSAGES`` messages of prose, 8.3 MB (just under the 8 MiB default): 200.
* *deep*: 1,000 levels of nesting in an extra field: 400 ``JSON_TOO_DEEP``.
* *oversized*: a 20 MB body with its ``Content-Length``: 413 ``PAYLOAD_TOO_LARGE``, read and discarded so the
  client reads the answer.

The table gives the RSS before the kind, its peak after any request of the kind, and after the last: growth
that stays flat across repetitions is the point (a first request may grow the heap once). It runs twice, each on a
fresh server: without the memory release (``CONTEXTSHIFT_RELEASE_MEMORY=0``) and with it (the default, glibc's
``malloc_trim`` after a request of ``RELEASE_AFTER_BYTES`` or more). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from contextshift import __version__
from contextshift.api.limits import DEFAULT_MAX_BODY_BYTES, MAX_MESSAGES, RELEASE_AFTER_BYTES, RELEASE_MEMORY_ENV

from .report import load_note, say
from .serving import served_model
from .signin import BENCH_HEADERS

RESULTS = Path(__file__).resolve().parent / "results" / "limits.md"
MODEL = "gpt-4o"
WINDOW = 128_000
JSON = {**BENCH_HEADERS, "Content-Type": "application/json"}


#: Seconds between an answer and the RSS reading: the memory release runs after the answer is sent.
SETTLE_SECONDS = 0.5


def rss_mib(pid: int) -> float:
    """The resident set size of process ``pid`` in MiB (``VmRSS`` of ``/proc/{pid}/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def near_max_bytes() -> list[dict[str, str]]:
    """``MAX_MESSAGES`` messages of prose whose JSON is just under the default 8 MiB body limit (accepted)."""
    room = (DEFAULT_MAX_BODY_BYTES - 64 * 1024) // MAX_MESSAGES - len('{"role":"assistant","content":""},')
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "the",
        "lazy",
        "dog",
        "and",
        "keeps",
        "running",
        "through",
        "the",
        "long",
        "night",
    ]
    out = []
    for n in range(MAX_MESSAGES):
        text = " ".join(words[(n + k) % len(words)] for k in range(room // 5))[:room]
        out.append({"role": "user" if n % 2 == 0 else "assistant", "content": text})
    out[-1] = {"role": "user", "content": "and now?"}
    return out


def bodies() -> dict[str, tuple[bytes, int]]:
    """Each kind's body and the status it is answered with."""
    attack = b'{"model":"gpt-4o","messages":[' + b",".join([b'{"role":"user","content":"a"}'] * 200_000) + b"]}"
    largest = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"} for n in range(MAX_MESSAGES)]
    largest[-1] = {"role": "user", "content": "and now?"}
    accepted = json.dumps({"model": MODEL, "messages": largest, "max_tokens": 100}).encode()
    heavy = json.dumps({"model": MODEL, "messages": near_max_bytes(), "max_tokens": 100}).encode()
    deep = (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"extra":'
        + b'{"d":' * 1000
        + b"1"
        + b"}" * 1000
        + b"}"
    )
    oversized = b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"x" * (20 * 1024 * 1024) + b'"}]}'
    return {
        "attack: 200,000 messages, 6 MB": (attack, 413),
        f"largest accepted: {MAX_MESSAGES:,} messages": (accepted, 200),
        f"near the byte limit: {MAX_MESSAGES:,} messages, 8 MB": (heavy, 200),
        "deep: 1,000 levels": (deep, 400),
        "oversized: 20 MB": (oversized, 413),
    }


def run(in_a_row: int, at_once: int, release: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    release_env = {RELEASE_MEMORY_ENV: "1" if release else "0"}
    with served_model(MODEL, WINDOW, echo=True, env=release_env) as served, httpx.Client(timeout=300) as client:
        pid, url = served.pid, f"{served.url}/v1/chat/completions"
        warm = client.post(
            url, json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, headers=BENCH_HEADERS
        )
        assert warm.status_code == 200, warm.text
        started = rss_mib(pid)
        say(f"service RSS after start and one small call: {started:.0f} MiB")

        def send(body: bytes, expected: int) -> None:
            with httpx.Client(timeout=300) as own:
                response = own.post(url, content=body, headers=JSON)
            if response.status_code != expected:
                raise RuntimeError(f"HTTP {response.status_code}, not {expected}: {response.text[:300]}")

        for kind, (body, expected) in bodies().items():
            before = rss_mib(pid)
            seen = []
            for _ in range(in_a_row):
                send(body, expected)
                time.sleep(SETTLE_SECONDS)
                seen.append(rss_mib(pid))
            with ThreadPoolExecutor(at_once) as pool:
                list(pool.map(send, [body] * at_once, [expected] * at_once))
            time.sleep(SETTLE_SECONDS)
            seen.append(rss_mib(pid))
            row = {
                "release": release,
                "kind": kind,
                "bytes": len(body),
                "status": expected,
                "before": before,
                "peak": max(seen),
                "after": seen[-1],
                "row": seen[:in_a_row],
            }
            rows.append(row)
            say(
                f"{'release' if release else 'no release'}: {kind:<44} {len(body) / 1e6:6.2f} MB -> "
                f"{expected}: RSS {before:.0f} MiB before, "
                f"{row['peak']:.0f} peak, {row['after']:.0f} after; in a row: "
                + ", ".join(f"{v:.0f}" for v in row["row"])
            )
    return rows


def markdown(rows: list[dict[str, Any]], command: str, load: str, in_a_row: int, at_once: int) -> str:
    lines = [
        "# Memory over repeated large /v1 requests (N6)",
        "",
        f"`{command}` · contextshift {__version__} · Python {platform.python_version()} · {platform.machine()} · "
        f"{load}",
        "",
        "The service as `contextshift serve` (SQLite) in its own process, the fake provider in another; per kind, "
        f"{in_a_row} requests in a row to `POST /v1/chat/completions`, then {at_once} at once, the server's RSS "
        "(`VmRSS`) read after each. Before N6 the attack request added about 800 MiB each, never given back "
        "(eight in a row: 134 MiB to 2.7 GiB; four at once peaked at 4.9 GiB).",
        "",
        "Each configuration is a fresh server: *release* is the default (after a request whose body is at least "
        f"{RELEASE_AFTER_BYTES // 1024} KiB, glibc's `malloc_trim(0)` hands freed heap pages back), "
        f"*no release* is `{RELEASE_MEMORY_ENV}=0`. The kinds run in this order on one server, so a row's *before* "
        f"is the row above's *after*. RSS is read {SETTLE_SECONDS} s after each answer (in both configurations): "
        "the release runs once the answer is sent.",
        "",
        "| memory release | request | body | answer | RSS before | peak | after the last | after each in a row |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'release' if r['release'] else 'no release'} | {r['kind']} | {r['bytes'] / 1e6:.2f} MB "
            f"| {r['status']} | {r['before']:.0f} MiB | {r['peak']:.0f} MiB "
            f"| {r['after']:.0f} MiB | " + ", ".join(f"{v:.0f}" for v in r["row"]) + " |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.limits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: 3 in a row and 2 at once per kind")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"Markdown results (default {RESULTS}; --quick writes nothing unless given)",
    )
    args = parser.parse_args(argv)
    in_a_row, at_once = (3, 2) if args.quick else (8, 4)
    load = load_note()
    say(f"limits benchmark: {in_a_row} in a row and {at_once} at once per kind; {load}")
    rows = run(in_a_row, at_once, release=False) + run(in_a_row, at_once, release=True)
    output: Path | None = args.output if args.output is not None or args.quick else RESULTS
    if output is not None:
        command = "python -m benchmarks.limits" + (" --quick" if args.quick else "")
        output.write_text(markdown(rows, command, load, in_a_row, at_once), encoding="utf-8")
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
