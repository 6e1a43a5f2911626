"""Every query of a whole turn over HTTP (``POST /chats/{id}/generate``) on a long chat, explained by the
database: none reads the chat (issue 26). The turn's load alone is covered in ``tests/service``; this one also
sees the sign-in, the chat's turn lease, appending the input and the reply, the audit and the usage totals."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import event, text

from contextshift.api.app import create_app
from contextshift.storage import Database, Repositories
from tests.databases import Backend
from tests.fakes import Reply
from tests.fakes.server import FakeProvider
from tests.service.test_turn_queries import explain_postgresql, explain_sqlite, long_history

from .conftest import ADMIN_TOKEN, CLIENT_OPTIONS, TEST_LOGIN_LIMIT, Server, bearer


async def test_no_query_of_a_generation_reads_the_whole_chat(backend: Backend, fake_provider: FakeProvider) -> None:
    db = backend.database()
    app = create_app(database=db, client_options=CLIENT_OPTIONS, admin_token=ADMIN_TOKEN, login_limit=TEST_LOGIN_LIMIT)
    with Server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60, headers=bearer(ADMIN_TOKEN)) as http:

            async def post(path: str, body: dict[str, Any], expect: int = 201) -> dict[str, Any]:
                response = await http.post(f"/api/v2{path}", json=body)
                assert response.status_code == expect, response.text
                return response.json()  # type: ignore[no-any-return]

            provider = await post("/providers", {"name": "f", "kind": "openai", "base_url": fake_provider.base_url})
            model = await post(
                "/models", {"provider_id": provider["provider"]["id"], "name": "gpt-4o", "context_window": 8192}
            )
            bot = await post("/bots", {"name": "b", "chat_model_id": model["model"]["id"], "compaction_enabled": False})
            chat_id = (await post("/chats", {"bot_id": bot["bot"]["id"]}))["chat"]["id"]
            mine = backend.database()  # the app's engine lives on the server's loop: this one on the test's
            await mine.start()
            try:
                for chunk in long_history():
                    async with mine.session() as session:
                        await Repositories(session).messages.append_many(chat_id, chunk)
                if backend.name == "postgresql":
                    async with mine.engine.connect() as connection:
                        await connection.execute(text("ANALYZE"))
                        await connection.commit()
                await _explained_turns(backend, db.engine.sync_engine, mine, post, chat_id, fake_provider)
            finally:
                await mine.close()


async def _explained_turns(
    backend: Backend, engine: Any, mine: Database, post: Any, chat_id: str, fake_provider: FakeProvider
) -> None:
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    for turn in range(2):  # the first stores the window's counts; the second is a warm turn
        fake_provider.script(Reply(f"reply {turn}"))
        seen.clear()
        event.listen(engine, "before_cursor_execute", record)
        try:
            await post(f"/chats/{chat_id}/generate", {"content": f"hello {turn}", "stream": False}, 200)
        finally:
            event.remove(engine, "before_cursor_execute", record)
    statements = list(seen)
    assert sum("FROM messages" in s for s, _ in statements) >= 4
    if backend.name == "postgresql":
        await explain_postgresql(mine, statements)
    else:
        await explain_sqlite(mine, statements)
