"""Standing instructions (G4b) in the core: detection, conflicts, retractions and the shift that keeps them."""

from __future__ import annotations

import pytest

from contextshift import Message, shift_with_strategy
from contextshift.core.errors import TokenBudgetExceeded
from contextshift.core.standing import STANDING_SHARE, active_standing, detect, superseded

INSTRUCTIONS = [
    ("Always cite your sources.", frozenset()),
    ("Never use emoji in replies.", frozenset()),
    ("Don't ever call me buddy.", frozenset()),
    ("From now on, reply in German.", frozenset({"reply-language"})),
    ("Reply in German from now on.", frozenset({"reply-language"})),
    ("Please answer only in French.", frozenset({"reply-language"})),
    ("Indent with tabs, never spaces.", frozenset({"indentation"})),
    ("I'm allergic to peanuts.", frozenset({"allergy:peanuts"})),
    ("I have a severe shellfish allergy.", frozenset({"allergy:shellfish"})),
    ("I'm lactose intolerant.", frozenset({"intolerance:lactose"})),
    ("I'm vegetarian.", frozenset({"diet"})),
    ("My name is Ada.", frozenset({"name"})),
    ("Call me Dr. Okafor.", frozenset({"name"})),
    ("I live in Lisbon.", frozenset({"residence"})),
    ("Btw, my pronouns are they/them.", frozenset({"pronouns"})),
]
RUSSIAN = [
    ("Всегда отвечай кратко.", frozenset()),
    ("Никогда не используй смайлики.", frozenset()),
    ("Отныне пиши по-русски.", frozenset({"reply-language"})),
    ("С этого момента говори со мной на ты.", frozenset()),
    ("У меня аллергия на орехи.", frozenset({"allergy:орехи"})),
    ("У меня непереносимость лактозы.", frozenset({"intolerance:лактозы"})),
    ("Я вегетарианка.", frozenset({"diet"})),
    ("Меня зовут Анна.", frozenset({"name"})),
    ("Зови меня Аня.", frozenset({"name"})),
    ("Я живу в Казани.", frozenset({"residence"})),
    ("Отвечай по-немецки.", frozenset({"reply-language"})),
    ("Пиши на английском языке.", frozenset({"reply-language"})),
    ("Кстати, используй табы для отступов.", frozenset({"indentation"})),
]
NOT_INSTRUCTIONS = [
    "I always wanted to visit Rome.",
    "I never liked winter much.",
    "Should I always use tabs?",
    "Can you never do that again?",
    "What is the capital of France?",
    "Never mind.",
    "The code uses spaces for indentation.",
    "Write a poem in German?",
    "Here is the log: ```always retry, never fail```",
    "If you always answer that fast, great.",
    "Почему всегда идёт дождь?",
    "Я всегда хотел побывать в Риме.",
    "Как меня зовут?",
    "Always " + "x" * 1200,
]


@pytest.mark.parametrize(("text", "topics"), INSTRUCTIONS)
def test_english_standing_instructions_are_detected_with_their_topics(text: str, topics: frozenset[str]) -> None:
    found = detect(text)
    assert found.standing and not found.retracts
    assert found.topics == topics


@pytest.mark.parametrize(("text", "topics"), RUSSIAN)
def test_russian_standing_instructions_are_detected_with_their_topics(text: str, topics: frozenset[str]) -> None:
    found = detect(text)
    assert found.standing and not found.retracts
    assert found.topics == topics


@pytest.mark.parametrize("text", NOT_INSTRUCTIONS)
def test_narrative_questions_and_long_pastes_are_not_standing(text: str) -> None:
    assert detect(text).standing is False


@pytest.mark.parametrize(
    "text",
    ["Forget that.", "You can use spaces again.", "Stop calling me Ada.", "Забудь это.", "Можешь снова пробелы."],
)
def test_retractions_are_detected_and_are_not_instructions(text: str) -> None:
    found = detect(text)
    assert found.retracts and not found.standing


def _chat(*texts: str) -> list[Message]:
    out = []
    for n, text in enumerate(texts):
        out.append(Message(role="user", content=text, id=f"u{n}"))
        out.append(Message(role="assistant", content="Noted.", id=f"a{n}"))
    return out


def test_the_newest_instruction_on_a_topic_wins_and_others_stay() -> None:
    chat = _chat("Call me Ada.", "Always cite sources.", "Reply in German.", "Call me Dr. Okafor.", "Answer in French.")
    assert active_standing(chat) == ["u1", "u3", "u4"]


def test_a_retraction_removes_the_instruction_on_its_topic_and_only_that_one() -> None:
    chat = _chat("Indent with tabs, never spaces.", "I'm vegetarian.", "You can use spaces again.")
    assert active_standing(chat) == ["u1"]


def test_a_bare_forget_that_removes_the_newest_and_a_worded_one_the_one_it_names() -> None:
    assert active_standing(_chat("I'm vegetarian.", "Always cite sources.", "Forget that.")) == ["u0"]
    assert active_standing(_chat("I'm vegetarian.", "Always cite sources.", "Forget that I'm vegetarian.")) == ["u1"]
    assert active_standing(_chat("Меня зовут Анна.", "Всегда отвечай кратко.", "Забудь это.")) == ["u0"]


def test_a_dismissed_message_never_counts_and_a_marked_one_always_does() -> None:
    chat = _chat("Always cite sources.", "Nice weather today.")
    chat[0] = Message(role="user", content="Always cite sources.", id="u0", meta={"standing": False})
    chat[2] = Message(role="user", content="Nice weather today.", id="u1", meta={"standing": True})
    assert active_standing(chat) == ["u1"]


def test_assistant_and_system_messages_are_never_standing() -> None:
    chat = [
        Message(role="assistant", content="Always cite sources.", id="a"),
        Message(role="system", content="Never use emoji.", id="s"),
    ]
    assert active_standing(chat) == []


def test_superseded_names_the_stored_instructions_a_new_message_ends() -> None:
    stored = [("m1", "Call me Ada."), ("m2", "Always cite sources."), ("m3", "Reply in German.")]
    assert superseded(stored, "Call me Dr. Okafor.") == ["m1"]
    assert superseded(stored, "Forget that.") == ["m3"]
    assert superseded(stored, "What's the weather?") == []


def words(text: str) -> int:
    return len(text.split())


def _long_chat() -> list[Message]:
    messages = [Message(role="system", content="You are a cook.", id="sys")]
    messages += [Message(role="user", content="I'm lactose intolerant.", id="fact")]
    messages += [Message(role="assistant", content="Noted, no dairy.", id="ack")]
    for n in range(20):
        messages.append(Message(role="user", content=f"Give me recipe number {n} please", id=f"q{n}"))
        messages.append(Message(role="assistant", content="step " * 20, id=f"r{n}"))
    messages.append(Message(role="user", content="Suggest a dessert.", id="now", source="input"))
    return messages


@pytest.mark.parametrize("strategy", ["truncate", "summarize", "recall", "vector-recall", "manual"])
def test_every_strategy_keeps_an_old_standing_instruction_in_its_place_with_reason_standing(strategy: str) -> None:
    # Counter: words + 4 per message. The system prompt 8, the instruction 7, the input 7: 22 protected.
    chat = _long_chat()
    without = shift_with_strategy(chat, words, 100, strategy=strategy)
    assert "fact" not in {m.id for m in without.kept}
    result = shift_with_strategy(chat, words, 100, strategy=strategy, standing=True)
    kept = [m.id for m in result.kept]
    assert kept[:2] == ["sys", "fact"]
    assert result.reasons["fact"] == "standing"
    assert result.kept[1] is chat[1]  # the message as given, not a pinned copy
    assert result.tokens <= 100
    assert "1 standing instruction(s) kept as protected context" in result.diagnostics


def test_standing_instructions_take_at_most_their_share_newest_first() -> None:
    # Each instruction costs 3 words + 4 = 7 tokens; 10% of 150 is 15: two fit, the newest two.
    chat = [Message(role="user", content=f"Always say {w}.", id=w) for w in ("alpha", "beta", "gamma")]
    chat += [Message(role="assistant", content="word " * 40, id=f"x{n}") for n in range(5)]
    result = shift_with_strategy(chat, words, 150, standing=True)
    assert STANDING_SHARE == 0.10
    assert {i: result.reasons[i] for i in ("alpha", "beta", "gamma")} == {
        "alpha": "context-shift",
        "beta": "standing",
        "gamma": "standing",
    }
    assert "1 standing instruction(s) did not fit their share of the budget" in result.diagnostics


def test_standing_never_makes_a_fitting_protected_prompt_raise() -> None:
    # Protected: 95 + 5 = 100 tokens of a 100 budget; the instruction (7) does not fit beside it: not pinned.
    chat = [
        Message(role="system", content="rule " * 91, id="sys"),
        Message(role="user", content="Always be brief.", id="fact"),
        Message(role="user", content="hi", id="now", source="input"),
    ]
    with pytest.raises(TokenBudgetExceeded):
        shift_with_strategy(chat, words, 90, standing=True)
    result = shift_with_strategy(chat, words, 100, standing=True)
    assert result.reasons["fact"] == "context-shift"
    assert result.reasons["sys"] == "protected"
