"""Building a turn's prompt in the service (service/counting.py): a pipeline that embeds texts runs in a worker
thread, so model inference never holds up the event loop that serves every other request."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from contextshift import Message
from contextshift.pipeline import PipelineRequest, Sources, run_pipeline
from contextshift.service.counting import run_counted
from tests.pipeline.test_pipeline import EXACT


class LetterCounts:
    """A real (if crude) embedder: each text's counts of the letters a-z; it notes the thread it runs on."""

    name = "letter-counts"

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        return [[float(text.lower().count(chr(c))) for c in range(ord("a"), ord("z") + 1)] for text in texts]


def long_history() -> list[Message]:
    topics = ["the vault code is 4471", "lunch was soup", "the weather is grey", "trains run late"]
    return [
        Message(id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=f"{topics[i % 4]} ({i})")
        for i in range(40)
    ]


def recall_request(embedder: LetterCounts | None) -> PipelineRequest:
    sources = Sources(history=long_history(), user_input="what is the vault code?")
    return PipelineRequest(
        sources=sources, profile=EXACT, context_limit=120, response_reserve=10, strategy="recall", embedder=embedder
    )


async def test_a_pipeline_with_an_embedder_runs_off_the_event_loop_thread() -> None:
    embedder = LetterCounts()
    result = await run_counted(recall_request(embedder), None, None)
    assert result.excluded_count > 0  # recall had history to search: the embedder was asked
    assert embedder.threads and threading.get_ident() not in embedder.threads


async def test_the_prompt_built_off_the_loop_is_the_one_built_on_it() -> None:
    off_loop = await run_counted(recall_request(LetterCounts()), None, None)
    on_loop = run_pipeline(recall_request(LetterCounts()))
    assert [m.id for m in off_loop.messages] == [m.id for m in on_loop.messages]
    assert off_loop.entries == on_loop.entries
