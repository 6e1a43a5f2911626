"""Benchmark: the added latency of the OpenAI-compatible endpoint over calling the provider directly.

Run from the project root:

    .venv/bin/python -m benchmarks.endpoint           # 100 / 1k / 10k messages -> benchmarks/results/endpoint.md
    .venv/bin/python -m benchmarks.endpoint --quick   # CI smoke (100 / 1k, fewer calls), writes nothing by default

What it does: starts the fake OpenAI-compatible provider of ``tests/fakes`` (it echoes the last user message)
in a process of its own (``python -m tests.fakes``), and the service as ``contextshift serve`` on a fresh SQLite
file in a temporary folder, as it is deployed: three processes on loopback, so that neither server's work
waits for the other's (or the benchmark's) hold on one interpreter. Over HTTP it creates a provider on the
fake and the model ``gpt-4o`` (the exact o200k profile) with a 128,000-token window. Per size it builds one
conversation of that many messages (``benchmarks/conversations.py``: 10-120 words a turn, some parallel
tool calls, ending with a user question) and sends the same Chat Completions body, non-streaming, with httpx:

* *direct*: ``POST {fake}/chat/completions``, what the app would do without contextshift;
* *endpoint*: ``POST {service}/v1/chat/completions`` with a contextshift token: authentication, fitting
  (the 10k conversation is over the window, so it is shifted; the smaller ones fit whole), the audit, and
  the same call to the fake (the call's end, its usage and the calibration are written after the reply).

Calls alternate (direct, endpoint, direct, ...) so that load from other processes falls on both alike;
the first two of each kind are warm-up. The table gives medians and the difference of the medians (the
added latency; target: under 10 ms at 1k messages), the service process's CPU time per endpoint call (read
from ``/proc``: what the endpoint costs, much less moved by other processes than the clock is), the first
call of each size (every text new, so counted by the tokenizer rather than taken from its cache; the
repeated calls are an agent resending its history), and how many messages the endpoint left out.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from contextshift import __version__

from . import conversations
from .report import load_note, say
from .signin import BENCH_HEADERS, BENCH_TOKEN

RESULTS = Path(__file__).resolve().parent / "results" / "endpoint.md"
MODEL = "gpt-4o"
WINDOW = 128_000
TARGET_MS_AT_1K = 10.0


def conversation(size: int) -> list[dict[str, Any]]:
    """``size`` messages in OpenAI shape (without contextshift ids), the last one a user question."""
    messages = [{k: v for k, v in m.items() if k != "id"} for m in conversations.generate(size - 1, seed=13)]
    messages.append({"role": "user", "content": "So, taking all of that into account, what should we do next?"})
    return messages


def post(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    response = client.post(url, json=body, headers=headers)
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        raise RuntimeError(f"{url}: HTTP {response.status_code} {response.text[:300]}")
    return elapsed, response


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used, or None where ``/proc`` cannot say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(sizes: list[int], calls: int) -> list[dict[str, Any]]:
    from tests.serving import ServeProcess

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        fake = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert fake.stdout is not None and fake.stdin is not None
        fake_url = f"http://127.0.0.1:{int(fake.stdout.readline())}"
        env = {"CONTEXTSHIFT_ADMIN_TOKEN": BENCH_TOKEN, "CONTEXTSHIFT_DATA_DIR": folder}
        service = ServeProcess(f"sqlite:///{Path(folder) / 'bench.db'}", Path(folder) / "serve.log", env).start()
        assert service.process is not None
        try:
            with httpx.Client(timeout=120) as client:
                provider = client.post(
                    f"{service.url}/api/v2/providers",
                    json={"name": "fake", "kind": "openai", "base_url": fake_url, "api_key": "sk-bench"},
                    headers=BENCH_HEADERS,
                ).json()["provider"]
                created = client.post(
                    f"{service.url}/api/v2/models",
                    json={"provider_id": provider["id"], "name": MODEL, "type": "chat", "context_window": WINDOW},
                    headers=BENCH_HEADERS,
                )
                assert created.status_code == 201, created.text
                endpoint_url = f"{service.url}/v1/chat/completions"
                for size in sizes:
                    body = {"model": MODEL, "messages": conversation(size), "max_tokens": 1000}
                    size_bytes = len(httpx.Request("POST", "/", json=body).content)
                    first, _ = post(client, endpoint_url, body, BENCH_HEADERS)
                    direct: list[float] = []
                    endpoint: list[float] = []
                    cpu = 0.0
                    excluded = 0
                    for n in range(calls + 2):
                        took, _ = post(client, f"{fake_url}/chat/completions", body, {"Authorization": "Bearer sk"})
                        before = cpu_seconds(service.process.pid)
                        took_endpoint, response = post(client, endpoint_url, body, BENCH_HEADERS)
                        after = cpu_seconds(service.process.pid)
                        excluded = int(response.headers["x-contextshift-excluded"])
                        if n >= 2:
                            direct.append(took)
                            endpoint.append(took_endpoint)
                            cpu += (after - before) if before is not None and after is not None else float("nan")
                    row = {
                        "size": size,
                        "bytes": size_bytes,
                        "direct_ms": statistics.median(direct) * 1000,
                        "endpoint_ms": statistics.median(endpoint) * 1000,
                        "cpu_ms": cpu / calls * 1000,
                        "first_ms": first * 1000,
                        "excluded": excluded,
                        "calls": calls,
                    }
                    row["added_ms"] = row["endpoint_ms"] - row["direct_ms"]
                    rows.append(row)
                    say(
                        f"{size:>6} messages ({size_bytes / 1e6:5.2f} MB): direct {row['direct_ms']:7.2f} ms, "
                        f"endpoint {row['endpoint_ms']:7.2f} ms, added {row['added_ms']:7.2f} ms, service CPU "
                        f"{row['cpu_ms']:6.1f} ms/call, first call {row['first_ms']:7.1f} ms, {excluded} left out "
                        f"({calls} calls each)"
                    )
        finally:
            service.stop()
            fake.stdin.close()
            fake.wait(timeout=30)
    return rows


def markdown(rows: list[dict[str, Any]], command: str, load: str) -> str:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "# The OpenAI-compatible endpoint: added latency over calling the provider directly",
        "",
        f"`{command}` · contextshift {__version__} · Python {platform.python_version()} · {platform.machine()} · "
        f"{load}",
        "",
        f"Model `{MODEL}` (o200k, exact), window {WINDOW:,} tokens, `max_tokens` 1000, non-streaming; the fake "
        "provider, the service (`contextshift serve`, SQLite) and this benchmark in three processes on loopback; "
        "medians of the calls per size, taken alternately. *Added* is the endpoint's median minus the direct "
        "median: authentication, reading the body, fitting, writing the audit and the second HTTP hop (the "
        "call's end and the calibration are written after the reply). *Service CPU* is the CPU time the "
        "service process used per endpoint call, those writes included. *First call* is the first "
        "endpoint call of each size (its texts not yet in the token-count cache; the timed calls resend the same "
        "history, as an agent does).",
        "",
        "| messages | body | direct (median) | endpoint (median) | added | service CPU per call | first call "
        "| left out | calls |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['bytes'] / 1e6:.2f} MB | {r['direct_ms']:.2f} ms | {r['endpoint_ms']:.2f} ms | "
            f"**{r['added_ms']:.2f} ms** | {r['cpu_ms']:.1f} ms | {r['first_ms']:.1f} ms | {r['excluded']:,} | "
            f"{r['calls']} |"
        )
    at_1k = next((r for r in rows if r["size"] == 1000), None)
    if at_1k is not None:
        verdict = "met" if at_1k["added_ms"] < TARGET_MS_AT_1K else "NOT met"
        lines += ["", f"Target: under {TARGET_MS_AT_1K:.0f} ms added at 1k messages: **{verdict}** in this run."]
    lines += ["", f"Peak RSS of the benchmark process (not the servers): {peak:.0f} MiB.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.endpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: 100 and 1k messages, fewer calls")
    parser.add_argument("--calls", type=int, default=None, help="timed calls per size and kind")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"Markdown results (default {RESULTS}; --quick writes nothing unless given)",
    )
    args = parser.parse_args(argv)
    sizes = [100, 1000] if args.quick else [100, 1000, 10_000]
    calls = args.calls if args.calls is not None else (3 if args.quick else 15)
    load = load_note()
    say(f"endpoint benchmark: sizes {sizes}, {calls} calls each; {load}")
    rows = run(sizes, calls)
    output: Path | None = args.output if args.output is not None or args.quick else RESULTS
    if output is not None:
        command = "python -m benchmarks.endpoint" + (" --quick" if args.quick else "")
        output.write_text(markdown(rows, command, load), encoding="utf-8")
        say(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
