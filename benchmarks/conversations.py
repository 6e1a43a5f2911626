"""Deterministic synthetic conversations for the benchmarks, and their LangChain / LlamaIndex twins.

A conversation is a list of OpenAI Chat Completions dicts: one system prompt, then alternating user and
assistant turns of 10–120 words, where about one assistant turn in eight calls tools (sometimes two in
parallel), gets a ``tool`` result for each call and then answers. Every message has an id.

The text mixes a few hundred common words with thousands of seeded pseudo-words, names, numbers and
identifiers, so practically every message text is distinct and a content-keyed count cache cannot hit
across messages (it can only hit on a message it has counted before, which is the point of the
growing-conversation benchmark).

The peers get the *same* conversation with the tool structure flattened into plain text: an assistant
message with tool calls becomes an assistant message whose content is exactly the text contextshift
counts for it (``Message.text``: content, then each call's name and arguments, joined by newlines), and a
tool result becomes an assistant message with the result as its content. So a per-message counter gives
every message the same cost on every side, and only the trimming logic differs.
"""

from __future__ import annotations

import json
import random
from typing import Any

from contextshift import Message


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


COMMON = _words(
    "the of and to in is that it for on with as was be this by at from or have an not are but we you "
    "they can will which their has more if one about all would there been so what when who also into "
    "than other some could these only new may them then over such our most after its first two any well "
    "because like make just time how people should very where need know work data system model user file "
    "value error request server config cache token budget message context prompt window memory history "
    "answer question result change update check build test run deploy release version branch commit "
    "issue plan team customer order price report query table index page account service network latency "
    "thread process queue worker batch retry timeout limit policy rule schema field record event signal "
    "story scene character village forest river castle night morning letter journey secret promise "
    "little great small large early late quick slow clear simple careful exact rough strong weak main "
    "please thanks sure right maybe still already really probably actually exactly instead between "
    "without within during before against toward around through under above below again always never"
)

NAMES = _words(
    "Alice Bob Carol Dmitri Elena Farah Gustavo Hiro Ingrid Jamal Keiko Lars Mina Nikolai Olu Priya "
    "Quentin Rosa Sven Tamsin Umar Valentina Wen Xavier Yara Zoltan Amsterdam Berlin Chicago Denver "
    "Edinburgh Florence Geneva Helsinki Istanbul Jakarta Kyoto Lisbon Madrid Nairobi Oslo Porto Quito"
)

TOOLS = ("search_docs", "get_weather", "run_sql", "read_file", "lookup_order", "create_ticket", "fetch_url")

_ONSETS = (
    "b",
    "br",
    "c",
    "ch",
    "d",
    "dr",
    "f",
    "fl",
    "g",
    "gr",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "pl",
    "qu",
    "r",
    "s",
    "sh",
    "st",
    "t",
    "th",
    "tr",
    "v",
    "w",
    "z",
)
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "x", "ck")

SYSTEM_PROMPT = (
    "You are Quill, a careful assistant for the Northwind engineering team. Answer in plain language, "
    "cite the document or ticket you used, and say when you are unsure. Use the tools when a question "
    "needs current data: search_docs for the handbook, run_sql for the analytics warehouse (read-only), "
    "lookup_order and create_ticket for customer work. Never invent order numbers, prices or dates. "
    "Keep answers under two hundred words unless the user asks for more, and end with a short list of "
    "next steps when the user is planning something."
)


class TextGen:
    """Seeded text: sentences over a mixed vocabulary (common words, pseudo-words, names, numbers)."""

    def __init__(self, rng: random.Random, rare_words: int = 6000) -> None:
        self.rng = rng
        words: set[str] = set()
        while len(words) < rare_words:
            syllables = rng.choice((1, 2, 2, 2, 3))
            words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)))
        self.rare = sorted(words)
        numbers = [str(rng.randint(2, 99_999)) for _ in range(3000)]
        idents = [f"{rng.choice(self.rare)}_{rng.choice(COMMON)}()" for _ in range(2000)]
        # (pool, share of all words): 66% common, 24% pseudo-words, 5% names, 3% numbers, 2% identifiers
        parts = ((COMMON, 0.66), (self.rare, 0.24), (NAMES, 0.05), (numbers, 0.03), (idents, 0.02))
        self.pool: list[str] = []
        self.cum_weights: list[float] = []
        total = 0.0
        for items, share in parts:
            for item in items:
                total += share / len(items)
                self.pool.append(item)
                self.cum_weights.append(total)

    def word(self) -> str:
        return self.rng.choices(self.pool, cum_weights=self.cum_weights)[0]

    def text(self, low: int = 10, high: int = 120) -> str:
        rng = self.rng
        count = rng.randint(low, high)
        words = rng.choices(self.pool, cum_weights=self.cum_weights, k=count)
        sentences: list[str] = []
        start = 0
        while start < count:
            size = min(count - start, rng.randint(5, 18))
            chunk = words[start : start + size]
            start += size
            if size > 8 and rng.random() < 0.4:
                chunk[rng.randint(2, size - 3)] += ","
            chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
            sentences.append(" ".join(chunk) + rng.choice((".", ".", ".", "?", "!")))
        return " ".join(sentences)


def _tool_arguments(gen: TextGen, tool: str) -> str:
    rng = gen.rng
    if tool == "run_sql":
        args: dict[str, Any] = {
            "query": f"SELECT {gen.word()} FROM {rng.choice(gen.rare)} "
            f"WHERE id = {rng.randint(1, 10**6)} LIMIT {rng.randint(1, 500)}"
        }
    elif tool == "get_weather":
        args = {"city": rng.choice(NAMES), "days": rng.randint(1, 7)}
    elif tool == "lookup_order":
        args = {"order_id": f"NW-{rng.randint(10**5, 10**6 - 1)}"}
    else:
        args = {"query": gen.text(3, 12)}
    return json.dumps(args)


def generate(size: int, seed: int = 7) -> list[dict[str, Any]]:
    """A conversation of exactly ``size`` messages (the system prompt included), as OpenAI dicts."""
    if size < 2:
        raise ValueError("a benchmark conversation needs at least 2 messages")
    rng = random.Random(f"contextshift-bench:{seed}:{size}")
    gen = TextGen(rng)
    out: list[dict[str, Any]] = [{"id": "m0", "role": "system", "content": SYSTEM_PROMPT}]
    calls = 0

    def add(message: dict[str, Any]) -> None:
        message["id"] = f"m{len(out)}"
        out.append(message)

    while len(out) < size:
        add({"role": "user", "content": gen.text()})
        room = size - len(out)
        if room <= 0:
            break
        parallel = 2 if rng.random() < 0.3 else 1
        if rng.random() < 0.125 and room >= parallel + 2:
            tool_calls = []
            for _ in range(parallel):
                calls += 1
                tool = rng.choice(TOOLS)
                tool_calls.append(
                    {
                        "id": f"call_{calls:06d}",
                        "type": "function",
                        "function": {"name": tool, "arguments": _tool_arguments(gen, tool)},
                    }
                )
            add({"role": "assistant", "content": gen.text(3, 20), "tool_calls": tool_calls})
            for call in tool_calls:
                add({"role": "tool", "tool_call_id": call["id"], "content": gen.text(20, 120)})
        add({"role": "assistant", "content": gen.text()})
    return out


def more_turns(conversation_size: int, turns: int, seed: int = 11) -> list[dict[str, Any]]:
    """``turns`` user/assistant pairs to append to a conversation of ``conversation_size`` messages."""
    rng = random.Random(f"contextshift-bench-more:{seed}:{conversation_size}")
    gen = TextGen(rng)
    out: list[dict[str, Any]] = []
    for _ in range(turns):
        for role in ("user", "assistant"):
            out.append({"id": f"m{conversation_size + len(out)}", "role": role, "content": gen.text()})
    return out


# -- the same conversation for each library -----------------------------------------------------------


def to_messages(dicts: list[dict[str, Any]]) -> list[Message]:
    """contextshift's own message objects (built outside the timed region, like the peers' objects)."""
    return [Message.from_dict(d) for d in dicts]


def flat_texts(dicts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) with the tool structure flattened: the exact text contextshift counts per message (for
    llama-index, whose memory buffer counts plain text only)."""
    flat = []
    for d in dicts:
        role = d["role"]
        flat.append(("assistant" if role == "tool" else role, Message.from_dict(d).text))
    return flat


def to_langchain(dicts: list[dict[str, Any]]) -> list[Any]:
    """The same conversation as LangChain messages, tool calls and results included (``AIMessage.tool_calls``
    with parsed arguments, ``ToolMessage``), as an app using LangChain holds it."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for d in dicts:
        role, content = d["role"], d.get("content") or ""
        if role == "tool":
            out.append(ToolMessage(content=content, tool_call_id=d["tool_call_id"], id=d["id"]))
        elif role == "assistant":
            calls = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]), "id": c["id"]}
                for c in d.get("tool_calls", ())
            ]
            out.append(AIMessage(content=content, tool_calls=calls, id=d["id"]))
        else:
            out.append((SystemMessage if role == "system" else HumanMessage)(content=content, id=d["id"]))
    return out


def langchain_text(message: Any) -> str:
    """The text of a LangChain message that contextshift counts for the same message: its content, then each
    tool call's name and arguments (``Message.text``), so both sides count the same characters."""
    content = message.content
    pieces = [content] if content else []
    for call in getattr(message, "tool_calls", None) or ():
        pieces.append(call["name"])
        pieces.append(json.dumps(call["args"]))
    return "\n".join(pieces)


def to_langchain_dicts(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the OpenAI-style dicts ``langchain_core.messages.convert_to_messages`` takes, tool
    calls and results included (the same dicts contextshift gets)."""
    return [dict(d) for d in dicts]


def to_llamaindex(dicts: list[dict[str, Any]]) -> list[Any]:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    roles = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
    return [ChatMessage(role=roles[role], content=text) for role, text in flat_texts(dicts)]
