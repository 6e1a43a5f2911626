"""C8: summaries that are not plausibly summaries are rejected as unfaithful; good summaries never are.

The good summaries below are written the way a capable summarizer writes them (in the conversation's
language, keeping the key names and numbers but not every detail); each bad one is what a weak local model
actually returned in the issue that asked for these checks.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextshift.core import Message, ToolCall
from contextshift.core.compaction import UNFAITHFUL, PlausibilitySettings, accept_summary, implausibility, select_fold
from contextshift.core.compaction.plausibility import (
    FEW_FACTS,
    OTHER_LANGUAGE,
    OTHER_SCRIPT,
    REFUSAL,
    is_refusal,
    latin_language,
    salient_facts,
)

ENGLISH = [
    "Hi! I'm planning a trip to Lisbon with my sister Maria in May. We have 5 days and a budget of 1200 euros.",
    "Great plan. For 5 days in Lisbon I'd suggest Alfama and Baixa on day 1, Belém on day 2, a day trip to "
    "Sintra on day 3, Cascais on day 4 and the LX Factory on day 5. With 1200 euros for two, budget about "
    "70 euros a night for a room near Rossio.",
    "Maria is vegetarian. Also our flight lands at 14:30 on May 12.",
    "Then on May 12 keep the afternoon light: check in near Rossio, then dinner at Ao 26 Vegan Food Project. "
    "In Belém, try Cafe Nicolau; in Sintra the Pena Palace opens at 9:30, so take the 8:41 train from Rossio.",
    "What about getting to Sintra and back cheaply?",
    "Buy a Navegante card for 1.80 euros; the Sintra train is 2.35 euros each way. The 434 bus loops to "
    "Pena Palace for 13.50 euros, or walk 40 minutes uphill.",
]
ENGLISH_GOOD = (
    "The user is planning a 5-day trip to Lisbon with her sister Maria (vegetarian) in May, budget 1200 euros, "
    "landing May 12 at 14:30. Suggested plan: Alfama/Baixa, Belém, Sintra day trip (8:41 train from Rossio, "
    "Pena Palace opens 9:30), Cascais, LX Factory; rooms near Rossio around 70 euros a night; vegan dinner at "
    "Ao 26. Cheap transport: Navegante card, Sintra train 2.35 euros each way, bus 434 to the palace."
)

RUSSIAN = [
    "Привет! Я пишу роман о Петербурге 1905 года. Главная героиня — Анна Воронцова, ей 24 года.",
    "Отличная идея. В 1905 году Петербург переживал Кровавое воскресенье 22 января. Анна может быть "
    "свидетельницей шествия к Зимнему дворцу вместе с рабочими Путиловского завода.",
    "Её брат Николай работает на Путиловском заводе. Он участвует в забастовке.",
    "Тогда Николай может попасть под арест после 22 января, а Анна будет искать его в Петропавловской "
    "крепости. Её жених, офицер Дмитрий Шувалов, окажется по другую сторону баррикад.",
    "Сколько глав лучше сделать?",
    "Я бы предложил 18 глав: 6 до 22 января, 6 о самих событиях и 6 об аресте Николая и выборе Анны.",
]
RUSSIAN_GOOD = (
    "Пользователь пишет роман о Петербурге 1905 года. Героиня — Анна Воронцова, 24 года; её брат Николай "
    "работает на Путиловском заводе и бастует, жених — офицер Дмитрий Шувалов. Сюжет строится вокруг "
    "Кровавого воскресенья 22 января: Анна видит шествие к Зимнему дворцу, Николая арестовывают, она ищет его "
    "в Петропавловской крепости. План: 18 глав, по 6 на каждую часть."
)

CHINESE = [
    "你好！我想在北京开一家咖啡店，预算是50万元，地点在朝阳区三里屯附近。",
    "三里屯租金较高，每平方米每月大约300元。50万元的预算中，装修约15万元，设备约8万元，剩下的作为租金和流动资金。",
    "我的合伙人王磊有十年咖啡师经验。我们计划每天营业12小时。",
    "有王磊的经验很好。建议第一年目标每天卖出200杯，平均售价30元，月营业额约18万元。",
    "需要办理哪些证件？",
    "需要营业执照、食品经营许可证和消防安全检查合格证，一般需要30到45天。",
]
CHINESE_GOOD = (
    "用户计划在北京朝阳区三里屯开咖啡店，预算50万元（装修约15万元，设备约8万元），租金每平方米每月约300元。"
    "合伙人王磊有十年咖啡师经验，每天营业12小时；第一年目标每天200杯、均价30元、月营业额约18万元。"
    "需办理营业执照、食品经营许可证和消防检查，约30到45天。"
)

CODE = [
    "My FastAPI endpoint get_user_orders is slow. It runs one query per order in a loop.",
    "That's the N+1 problem. Use selectinload: `select(User).options(selectinload(User.orders))`. With 500 "
    "orders you go from 501 queries to 2.",
    "I tried it, now it's 2 queries but still 800 ms. The orders table has 2000000 rows.",
    "Add an index on orders.user_id: `CREATE INDEX ix_orders_user_id ON orders (user_id);` and paginate with "
    "limit=50. Check with EXPLAIN ANALYZE; expect under 20 ms.",
    "Index added, 14 ms now. Should I cache with Redis?",
    "At 14 ms, caching adds invalidation work for little gain. Keep it simple unless traffic grows past "
    "about 1000 requests per second.",
]
CODE_GOOD = (
    "The user's FastAPI endpoint get_user_orders had an N+1 problem; selectinload(User.orders) cut 501 queries "
    "to 2, but it still took 800 ms on the 2000000-row orders table. An index ix_orders_user_id on "
    "orders.user_id plus pagination (limit=50) brought it to 14 ms. Redis caching was advised against unless "
    "traffic passes about 1000 requests per second."
)

TOOLS = [
    Message("user", "What's the weather in Oslo and Bergen tomorrow?"),
    Message(
        "assistant",
        "",
        tool_calls=(
            ToolCall("c1", "get_forecast", '{"city": "Oslo", "date": "2026-12-02"}'),
            ToolCall("c2", "get_forecast", '{"city": "Bergen", "date": "2026-12-02"}'),
        ),
    ),
    Message("tool", '{"city": "Oslo", "high_c": -2, "low_c": -7, "precip_mm": 0, "wind_ms": 3}', tool_call_id="c1"),
    Message("tool", '{"city": "Bergen", "high_c": 5, "low_c": 2, "precip_mm": 14, "wind_ms": 9}', tool_call_id="c2"),
    Message("assistant", "Tomorrow Oslo is dry, -2 to -7 °C; Bergen is wet, 2 to 5 °C with 14 mm of rain."),
    Message("user", "Thanks. Book me the 07:15 train from Oslo to Bergen."),
    Message(
        "assistant", "", tool_calls=(ToolCall("c3", "book_train", '{"from": "Oslo", "to": "Bergen", "time": "07:15"}'),)
    ),
    Message("tool", '{"booking_id": "NSB-48213", "seat": "12A", "price_nok": 949}', tool_call_id="c3"),
    Message("assistant", "Booked: NSB-48213, seat 12A, 949 NOK."),
]
TOOLS_GOOD = (
    "The user asked for tomorrow's (2026-12-02) forecast: Oslo dry, -2 to -7 °C; Bergen wet, 2 to 5 °C, 14 mm "
    "rain. Then booked the 07:15 train from Oslo to Bergen: booking NSB-48213, seat 12A, 949 NOK."
)

ROLEPLAY = [
    "*The tavern door creaks open.* Kaelen, the half-elf ranger, shakes snow from her cloak and looks for Brom.",
    'Brom the innkeeper waves from behind the bar. "Kaelen! The caravan to Highmere left without you. Three '
    'days ago. Captain Ysolde said you owed her 40 gold."',
    '"Forty? It was twenty, and she knows it." Kaelen sits and asks about the road north to Highmere.',
    'Brom lowers his voice. "Wolves on the Pale Road, and worse. The Ashen Circle took the bridge at Varn '
    'Ford. If you go, take the old mine path past Greyholt."',
    "Kaelen buys supplies for 12 silver and asks Brom to send word to her brother Tavin in Highmere.",
    "Brom agrees and hands her a sealed letter for Tavin, warning that the mine path floods after midnight.",
]
ROLEPLAY_GOOD = (
    "Kaelen, a half-elf ranger, reached Brom's tavern after missing the caravan to Highmere (gone three days; "
    "Captain Ysolde claims she owes 40 gold, Kaelen says 20). Brom warned of wolves on the Pale Road and the "
    "Ashen Circle holding the bridge at Varn Ford, and advised the old mine path past Greyholt, which floods "
    "after midnight. Kaelen bought supplies for 12 silver; Brom gave her a sealed letter for her brother Tavin "
    "in Highmere."
)

GOOD = {
    "english": (ENGLISH, ENGLISH_GOOD),
    "russian": (RUSSIAN, RUSSIAN_GOOD),
    "chinese": (CHINESE, CHINESE_GOOD),
    "code": (CODE, CODE_GOOD),
    "tools": ([m.text for m in TOOLS], TOOLS_GOOD),
    "roleplay": (ROLEPLAY, ROLEPLAY_GOOD),
}


@pytest.mark.parametrize("case", sorted(GOOD))
def test_good_summaries_are_not_rejected(case: str) -> None:
    history, summary = GOOD[case]
    assert implausibility(history, summary) is None


@pytest.mark.parametrize("case", sorted(GOOD))
def test_a_terse_summary_keeping_the_most_frequent_fifth_of_the_facts_passes(case: str) -> None:
    history, _ = GOOD[case]
    salient = [fact for fact, _ in salient_facts(history)]
    keep = salient[: max(1, -(-len(salient) // 5))]  # the most frequent fifth of them, rounded up
    summary = "Key points: " + ", ".join(f.lstrip("#") for f in keep) + "."
    assert implausibility(history, summary) is None


def test_an_english_story_for_a_chinese_chat_is_in_another_script() -> None:
    made_up = "In the context of the video, the user's message was about a coffee and the shop of a friend."
    assert implausibility(CHINESE, made_up) == OTHER_SCRIPT


def test_a_summary_in_latin_letters_of_a_russian_chat_is_in_another_script() -> None:
    assert implausibility(RUSSIAN, "The user writes a novel about Anna in 1905 and her brother.") == OTHER_SCRIPT


def test_an_english_summary_of_a_french_chat_is_in_another_language() -> None:
    french = [
        "Bonjour, je cherche un appartement à Lyon pour le mois de mars avec un budget de 900 euros.",
        "Pour 900 euros par mois, le quartier de la Croix-Rousse est une bonne option, et les prix sont dans "
        "la moyenne de la ville. Vous pouvez aussi regarder Villeurbanne, qui est moins cher que le centre.",
        "Je travaille à la Part-Dieu, donc je voudrais être à moins de 20 minutes en métro.",
    ]
    english = "The user is looking for a flat in Lyon in March with a budget of 900 euros, and works at Part-Dieu."
    assert latin_language(" ".join(french)) == "fr" and latin_language(english) == "en"
    assert implausibility(french, english) == OTHER_LANGUAGE


@pytest.mark.parametrize(
    "apology",
    [
        "I'm sorry for any confusion, but I cannot summarize this conversation.",
        "I’m sorry for any confusion. Let me know if there is anything else I can help you with!",
        "As an AI language model, I do not have the ability to recall past conversations.",
        "Извините, я не могу помочь с этим.",
        "抱歉，我无法完成这个请求。",
    ],
)
def test_content_free_apologies_are_refusals(apology: str) -> None:
    history = {"Извините": RUSSIAN, "抱歉": CHINESE}.get(apology[:2] if apology.startswith("抱歉") else apology[:8])
    assert is_refusal(apology)
    assert implausibility(history or ENGLISH, apology) == REFUSAL


def test_an_apology_that_goes_on_to_summarize_is_not_a_refusal() -> None:
    summary = "Sorry, here is the summary. " + ENGLISH_GOOD
    assert implausibility(ENGLISH, summary) is None


def test_a_generic_summary_without_names_or_numbers_keeps_too_few_facts() -> None:
    vague = "The user talked about a trip and asked for advice about places, food and transport. It went well."
    assert implausibility(ENGLISH, vague) == FEW_FACTS
    assert implausibility(ENGLISH, vague, PlausibilitySettings(min_fact_share=0.0)) is None


def test_a_short_history_is_not_judged_on_facts_or_script() -> None:
    assert implausibility(["hi", "hello!"], "Greetings were exchanged.") is None
    assert implausibility(["你好"], "They said hello.") is None


def test_accept_summary_rejects_an_unfaithful_reply_with_its_detail_and_stores_nothing() -> None:
    history = [Message("user" if i % 2 == 0 else "assistant", text, id=f"m{i}") for i, text in enumerate(CHINESE)]
    history.append(Message("user", "谢谢", id="current"))
    selection = select_fold(history, target_tokens=None, input_budget=10_000, counter=None)
    assert not selection.empty
    verdict, record = accept_summary("I'm sorry for any confusion.", "stop", selection, message_id="s1")
    assert (verdict.ok, verdict.reason, verdict.detail, record) == (False, UNFAITHFUL, REFUSAL, None)
    verdict, record = accept_summary(CHINESE_GOOD, "stop", selection, message_id="s1")
    assert verdict.ok and record is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=80), min_size=0, max_size=6), st.text(max_size=120))
def test_the_checks_are_total_and_an_exact_copy_of_the_history_always_passes(history: list[str], extra: str) -> None:
    implausibility(history, extra)  # never raises
    copy = "\n".join(history)
    if copy.strip() and not is_refusal(copy):
        assert implausibility(history, copy) in (None,)
