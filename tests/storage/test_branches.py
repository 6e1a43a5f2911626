"""Branches (issue 27), as an invariant: whatever edits and switches a chat goes through, no message is lost or
doubled (every id is either shown or parked in exactly one version's tail), the shown messages are in seq
order, switching to a version and back shows exactly what was shown before, and the chat's kept message
counts equal a recount. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextshift.storage import Database, Repositories
from contextshift.storage.repositories.branches import branch_from, show_branch
from contextshift.storage.tables import ChatRow
from tests.databases import Backend

from .seed import seed_chat
from .test_message_counts import _recount

#: ("say",): a user message and a reply; ("edit", n): branch the n-th shown user message (mod how many);
#: ("switch", n, v): show version v of the n-th shown user message (mod how many there are).
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("say")),
        st.tuples(st.just("edit"), st.integers(0, 9)),
        st.tuples(st.just("switch"), st.integers(0, 9), st.integers(0, 4)),
    ),
    min_size=1,
    max_size=12,
)


def _parked(alternatives: list[dict[str, Any]] | None) -> list[str]:
    """Every message id parked in these versions' tails, nested tails included."""
    out: list[str] = []
    for version in alternatives or []:
        for saved in (version.get("tail") or {}).get("messages") or []:
            out.append(saved["id"])
            out += _parked(saved.get("alternatives"))
    return out


async def _shown(repos: Repositories, chat_id: str) -> list[Any]:
    return list(await repos.messages.chronological(chat_id))


async def _step(repos: Repositories, chat_id: str, op: tuple[Any, ...], said: int) -> str | None:
    """Run one operation; the id of a message it created, if any."""
    users = [m for m in await _shown(repos, chat_id) if m.role == "user"]
    if op[0] == "say" or not users:
        rows = await repos.messages.append_many(
            chat_id, [{"role": "user", "content": f"q{said}"}, {"role": "assistant", "content": f"a{said}"}]
        )
        return ",".join(r.id for r in rows)
    target = users[op[1] % len(users)]
    if op[0] == "edit":
        await branch_from(repos.messages, chat_id, target.id, f"{target.content}*")
    elif target.alternatives:
        before = [m.id for m in await _shown(repos, chat_id)]
        shown = target.alternative or 0
        await show_branch(repos.messages, chat_id, target.id, op[2] % len(target.alternatives))
        await show_branch(repos.messages, chat_id, target.id, shown)
        assert [m.id for m in await _shown(repos, chat_id)] == before
        await show_branch(repos.messages, chat_id, target.id, op[2] % len(target.alternatives))
    return None


async def _scenario(backend: Backend, ops: list[tuple[Any, ...]]) -> None:
    db: Database = backend.database()
    await db.start()
    try:
        chat_id = (await seed_chat(db)).chat_id
        created: list[str] = []
        for n, op in enumerate(ops):
            async with db.session() as session:
                repos = Repositories(session)
                made = await _step(repos, chat_id, op, n)
                created += made.split(",") if made else []
            async with db.session() as session:
                shown = await _shown(Repositories(session), chat_id)
            parked = [i for m in shown for i in _parked(m.alternatives)]
            everything = [m.id for m in shown] + parked
            assert sorted(everything) == sorted(created)  # nothing lost, nothing twice
            assert [m.seq for m in shown] == sorted({m.seq for m in shown})
            async with db.session() as session:
                chat = await session.get(ChatRow, chat_id)
                assert chat is not None
                kept = (chat.raw_messages, chat.summarized_messages)
            assert kept == await _recount(db, chat_id)  # the maintained counts follow the branch shown
    finally:
        await db.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_edits_and_switches_never_lose_or_double_a_message(backend: Backend, ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(_scenario(backend, ops))
