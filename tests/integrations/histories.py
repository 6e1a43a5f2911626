"""Random agent histories for the adapters' property tests, as framework-neutral events.

A history is a system prompt, then turns of user messages, assistant text, assistant tool calls (one to three
in parallel) and tool results. A result may come several events after its call, with user messages and other
calls' results between (non-adjacent), in any order; every call gets its result before the final user message,
which ends the history. Each framework's test maps the events to its own objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

WORDS = [
    *("alpha", "beta", "gamma", "delta", "order", "invoice", "berlin"),
    *("paris", "seven", "twelve", "shipped", "refund", "weather", "latency"),
]


@dataclass(frozen=True)
class Event:
    """One step: ``kind`` is ``system``, ``user``, ``assistant``, ``calls`` (``call_ids``) or ``result``."""

    kind: str
    text: str
    call_ids: tuple[str, ...] = ()


@st.composite
def texts(draw: st.DrawFn) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)))


@st.composite
def histories(draw: st.DrawFn, max_steps: int = 24) -> list[Event]:
    """A random history (see the module docstring); call ids are ``call_<n>``."""
    events = [Event("system", "You are a careful assistant. " + draw(texts()))]
    pending: list[str] = []
    calls = 0
    for _ in range(draw(st.integers(1, max_steps))):
        choice = draw(st.sampled_from(["user", "assistant", "calls", "result", "result"]))
        if choice == "result" and pending:
            call_id = pending.pop(draw(st.integers(0, len(pending) - 1)))
            events.append(Event("result", draw(texts()), (call_id,)))
        elif choice == "calls":
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                calls += 1
                ids.append(f"call_{calls}")
            pending.extend(ids)
            events.append(Event("calls", draw(texts()), tuple(ids)))
        elif choice == "assistant":
            events.append(Event("assistant", draw(texts())))
        else:
            events.append(Event("user", draw(texts())))
    while pending:
        call_id = pending.pop(draw(st.integers(0, len(pending) - 1)))
        events.append(Event("result", draw(texts()), (call_id,)))
    events.append(Event("user", "Now: " + draw(texts())))
    return events
