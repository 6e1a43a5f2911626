"""Benchmark: the added latency of the OpenAI-compatible endpoint over calling the provider directly.

Run from the project root:

    .venv/bin/python -m benchmarks.endpoint           # 100 / 1k / 10k messages -> benchmarks/results/endpoint.md
    .venv/bin/python -m benchmarks.endpoint --quick   # CI smoke (100 / 1k, fewer calls), writes nothing by default

What it does: starts a fixed-reply upstream (``python -m benchmarks.serving``: it reads each request body
whole and parses none of it, so the direct path costs what the network and the upstream's reading cost, never
a JSON parse that grows with the body) in a process of its own, and the service as ``contextshift serve`` on a
fresh SQLite file in a temporary folder, as it is deployed: three processes on loopback, so that neither
server's work waits for the other's (or the benchmark's) hold on one interpreter (``serving.served_model``).
Over HTTP it creates a provider on the upstream and the model ``gpt-4o`` (the exact o200k profile) with a
128,000-token window. Where a ``litellm`` command is found (``$CONTEXTSHIFT_BENCH_LITELLM``, or on the
PATH; a virtualenv of its own with ``litellm[proxy]`` will do), LiteLLM's proxy runs beside it, offline
(``LITELLM_LOCAL_MODEL_COST_MAP=True``), in front of the same upstream. Per size it builds one conversation of
that many messages (``benchmarks/conversations.py``: 10-120 words a turn, some parallel tool calls, ending with
a user question) and sends the same Chat Completions body, non-streaming, with httpx:

* *direct*: ``POST {upstream}/chat/completions``, what the app would do without contextshift;
* *endpoint*: ``POST {service}/v1/chat/completions`` with a contextshift token: authentication, fitting
  (the 10k conversation is over the window, so it is shifted; the smaller ones fit whole), the audit, and
  the same call to the upstream (the call's end and the calibration are written after the reply);
* *LiteLLM proxy* (when installed): ``POST {litellm}/chat/completions``, the same body passed on whole.

Calls alternate (direct, endpoint, LiteLLM, direct, ...) so that load from other processes falls on both alike;
the first two of each kind are warm-up. The table gives medians and the difference of the medians (the
added latency; target: under 10 ms at 1k messages), the service process's CPU time per endpoint call (read
from ``/proc``: what the endpoint costs, much less moved by other processes than the clock is), the first
call of each size (every text new, so counted by the tokenizer rather than taken from its cache; the
repeated calls are an agent resending its history), and how many messages the endpoint left out.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import resource
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from contextshift import __version__

from . import conversations
from .report import load_note, say
from .serving import served_model
from .signin import BENCH_HEADERS

RESULTS = Path(__file__).resolve().parent / "results" / "endpoint.md"
MODEL = "gpt-4o"
WINDOW = 128_000
TARGET_MS_AT_1K = 10.0
#: LiteLLM's proxy's master key for this run (it will not start without one).
LITELLM_KEY = f"sk-{secrets.token_hex(32)}"


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


@contextlib.contextmanager
def litellm_proxy(upstream_url: str) -> Iterator[str | None]:
    """LiteLLM's proxy (``litellm --config``) on a loopback port in front of the same upstream, offline
    (``LITELLM_LOCAL_MODEL_COST_MAP=True``), if a ``litellm`` command is found; its base URL, or None.

    The command is ``$CONTEXTSHIFT_BENCH_LITELLM``, else ``litellm`` on the PATH or beside this interpreter. It runs
    in a process of its own, so it may come from a virtualenv of its own: ``litellm[proxy]`` pins older versions
    of packages contextshift uses (cryptography, websockets, rich), so it is not in the ``bench`` extra."""
    command = os.environ.get("CONTEXTSHIFT_BENCH_LITELLM") or shutil.which("litellm")
    beside = Path(sys.executable).parent / "litellm"
    if command is None and beside.exists():
        command = str(beside)
    if command is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "litellm.yaml"
        config.write_text(
            "model_list:\n"
            f"  - model_name: {MODEL}\n"
            "    litellm_params:\n"
            f"      model: openai/{MODEL}\n"
            f"      api_base: {upstream_url}\n"
            "      api_key: sk-bench\n",
            encoding="utf-8",
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "LITELLM_MASTER_KEY": LITELLM_KEY,  # it refuses to start without one
        }
        log = (Path(folder) / "litellm.log").open("w")
        process = subprocess.Popen(
            [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300  # importing litellm takes long on a loaded machine
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"LiteLLM's proxy did not start (see {log.name})")
                time.sleep(0.25)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)
            log.close()


def run(sizes: list[int], calls: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with (
        served_model(MODEL, WINDOW) as served,
        litellm_proxy(served.upstream_url) as litellm_url,
        httpx.Client(timeout=120) as client,
    ):
        if litellm_url is None:
            say("no litellm command (CONTEXTSHIFT_BENCH_LITELLM or PATH): LiteLLM's proxy is not measured")
        endpoint_url = f"{served.url}/v1/chat/completions"
        upstream = {"Authorization": "Bearer sk-bench"}
        for size in sizes:
            body = {"model": MODEL, "messages": conversation(size), "max_tokens": 1000}
            size_bytes = len(httpx.Request("POST", "/", json=body).content)
            first, _ = post(client, endpoint_url, body, BENCH_HEADERS)
            direct: list[float] = []
            endpoint: list[float] = []
            litellm: list[float] = []
            cpu = 0.0
            excluded = 0
            for n in range(calls + 2):
                took, _ = post(client, f"{served.upstream_url}/chat/completions", body, upstream)
                before = cpu_seconds(served.pid)
                took_endpoint, response = post(client, endpoint_url, body, BENCH_HEADERS)
                after = cpu_seconds(served.pid)
                took_litellm = (
                    post(client, f"{litellm_url}/chat/completions", body, {"Authorization": f"Bearer {LITELLM_KEY}"})[0]
                    if litellm_url
                    else 0.0
                )
                excluded = int(response.headers["x-contextshift-excluded"])
                if n >= 2:
                    direct.append(took)
                    endpoint.append(took_endpoint)
                    litellm.append(took_litellm)
                    cpu += (after - before) if before is not None and after is not None else float("nan")
            row = {
                "size": size,
                "bytes": size_bytes,
                "direct_ms": statistics.median(direct) * 1000,
                "endpoint_ms": statistics.median(endpoint) * 1000,
                "litellm_ms": statistics.median(litellm) * 1000 if litellm_url else None,
                "cpu_ms": cpu / calls * 1000,
                "first_ms": first * 1000,
                "excluded": excluded,
                "calls": calls,
            }
            row["added_ms"] = row["endpoint_ms"] - row["direct_ms"]
            row["litellm_added_ms"] = row["litellm_ms"] - row["direct_ms"] if litellm_url else None
            rows.append(row)
            beside = f", LiteLLM proxy added {row['litellm_added_ms']:7.2f} ms" if litellm_url else ""
            say(
                f"{size:>6} messages ({size_bytes / 1e6:5.2f} MB): direct {row['direct_ms']:7.2f} ms, "
                f"endpoint {row['endpoint_ms']:7.2f} ms, added {row['added_ms']:7.2f} ms{beside}, service CPU "
                f"{row['cpu_ms']:6.1f} ms/call, first call {row['first_ms']:7.1f} ms, {excluded} left out "
                f"({calls} calls each)"
            )
    return rows


def markdown(rows: list[dict[str, Any]], command: str, load: str) -> str:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "# The OpenAI-compatible endpoint: added latency over calling the provider directly",
        "",
        f"`{command}` · contextshift {__version__} · Python {platform.python_version()} · {platform.machine()} · "
        f"{load}",
        "",
        f"Model `{MODEL}` (o200k, exact), window {WINDOW:,} tokens, `max_tokens` 1000, non-streaming; a fixed-reply "
        "upstream that parses no body (`python -m benchmarks.serving`), the service (`contextshift serve`, SQLite) "
        "and this benchmark in three processes on loopback; "
        "medians of the calls per size, taken alternately. *Added* is the endpoint's median minus the direct "
        "median: authentication, reading the body, fitting, writing the audit and the second HTTP hop (the "
        "call's end and the calibration are written after the reply). *Service CPU* is the CPU time the "
        "service process used per endpoint call, those writes included. *First call* is the first "
        "endpoint call of each size (its texts not yet in the token-count cache; the timed calls resend the same "
        "history, as an agent does). *LiteLLM proxy added*: LiteLLM's proxy (offline cost map) in front of the same "
        "upstream, its median minus the direct median, in the same run (it passes the whole body on: it does not "
        "fit the conversation to the window).",
        "",
        "| messages | body | direct (median) | endpoint (median) | added | LiteLLM proxy added | service CPU per "
        "call | first call | left out | calls |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        litellm = "not run" if r["litellm_added_ms"] is None else f"{r['litellm_added_ms']:.2f} ms"
        lines.append(
            f"| {r['size']:,} | {r['bytes'] / 1e6:.2f} MB | {r['direct_ms']:.2f} ms | {r['endpoint_ms']:.2f} ms | "
            f"**{r['added_ms']:.2f} ms** | {litellm} | {r['cpu_ms']:.1f} ms | {r['first_ms']:.1f} ms | "
            f"{r['excluded']:,} | {r['calls']} |"
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
