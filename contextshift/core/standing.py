"""Standing instructions (G4b): find the user's durable instructions, preferences and identity facts.

Pure and deterministic: no model call, no I/O. A message is read sentence by sentence (fenced code left out);
it is *standing* when one of its sentences matches a rule below. The rules are anchored at the start of a
sentence (after fillers such as "please", "also", "ok", "btw", "remember that", "и", "пожалуйста"), so
narrative and reported speech do not count.

What counts (English and Russian):

* a command with a durable adverb: "Always cite sources.", "Never use emoji.", "Don't ever call me buddy.",
  "From now on, answer briefly.", "Going forward use metric units.", "Всегда пиши код на Python.",
  "Никогда не используй смайлики.", "Отныне отвечай кратко.", "С этого момента говори на ты.";
  "… from now on" / "… с этого момента" at the end of any sentence also counts ("Reply in German from now on.");
* the reply language: "Reply in German.", "Answer only in French.", "Отвечай по-немецки.",
  "Пиши на английском языке.";
* indentation: "Indent with tabs, never spaces.", "Use spaces for indentation.", "Используй табы.";
* identity and health facts: "I'm allergic to peanuts.", "I have a peanut allergy.", "I'm lactose
  intolerant.", "I'm vegetarian." (vegan, pescatarian, diabetic, celiac), "My name is Ada.", "Call me
  Dr. Okafor.", "Address me as Captain.", "I live in Lisbon.", "My pronouns are they/them.",
  "У меня аллергия на орехи.", "У меня непереносимость лактозы.", "Я вегетарианец.", "Меня зовут Анна.",
  "Зови меня Аня.", "Я живу в Казани.".

What does not count:

* questions: a sentence ending in "?" or opening with a question word ("Should I always…", "Can you
  never…", "Почему всегда…");
* narrative in the first person: "I always wanted to see Rome." and "I never liked winter." report the
  past or a habit, they instruct nobody; only the identity facts listed above are taken from "I …"
  sentences (the judgment call: "I always…" is a memory more often than a standing order, and a wrongly
  kept sentence costs budget in every prompt, while the user can still say "always …");
* "never mind", "I'll never…", a conditional ("If you always…"), anything longer than
  :data:`MAX_STANDING_CHARS` (pasted material, not an instruction).

Conflicts and retractions (:func:`active_standing`): an instruction has *topics* (``reply-language``,
``name``, ``indentation``, ``residence``, ``diet``, ``pronouns``, ``allergy:<thing>``…); a newer one on the
same topic replaces the older ("Call me Ada." then "Call me Dr. Okafor."), and instructions without a topic
never conflict. A retraction ("Forget that.", "You can use spaces again.", "Stop calling me Ada.",
"Ignore my previous instruction.", "Забудь это.", "Можешь снова использовать пробелы.") removes one
instruction: the newest on its topic when it names one, else the newest sharing one of its content words
("Forget that I'm vegetarian."), else simply the newest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from .messages import Message
from .shifting import Counter, Prompt, ShiftResult
from .vocabulary import CONTEXT_SHIFT, PROTECTED, STANDING

#: The meta key that marks a message standing (the service sets it from its stored flag): True marks it,
#: False overrides detection (the user dismissed it).
STANDING_KEY: Final = "standing"
#: The largest share of the budget standing instructions may take (G4b); the newest are kept first.
STANDING_SHARE: Final = 0.10
#: A longer message is material the user pasted, not an instruction.
MAX_STANDING_CHARS: Final = 1000

_LANGUAGES: Final = {
    "english": "english", "german": "german", "french": "french", "spanish": "spanish", "italian": "italian",
    "portuguese": "portuguese", "russian": "russian", "ukrainian": "ukrainian", "polish": "polish",
    "dutch": "dutch", "swedish": "swedish", "norwegian": "norwegian", "danish": "danish", "finnish": "finnish",
    "czech": "czech", "greek": "greek", "turkish": "turkish", "arabic": "arabic", "hebrew": "hebrew",
    "hindi": "hindi", "chinese": "chinese", "mandarin": "chinese", "japanese": "japanese", "korean": "korean",
    "vietnamese": "vietnamese", "thai": "thai", "indonesian": "indonesian", "latin": "latin",
    "английск": "english", "немецк": "german", "французск": "french", "испанск": "spanish",
    "итальянск": "italian", "португальск": "portuguese", "русск": "russian", "украинск": "ukrainian",
    "польск": "polish", "китайск": "chinese", "японск": "japanese", "корейск": "korean",
    "англий": "english", "немец": "german", "француз": "french", "испан": "spanish", "итальян": "italian",
    "португаль": "portuguese", "русс": "russian", "украин": "ukrainian", "польс": "polish",
    "китай": "chinese", "япон": "japanese", "корей": "korean",
}  # fmt: skip

_FILLER = (
    r"(?:(?:please|pls|also|and|ok|okay|so|btw|by the way|fyi|note|note that|remember|remember that|"
    r"just so you know|important|и|а|также|еще|пожалуйста|кстати|запомни|запомни что|важно|учти|учти что)"
    r"[\s,:!-]+)*"
)
#: A durable adverb before the command itself ("From now on, reply in German").
_DURABLE = r"(?:(?:from now on|going forward|henceforth|always|отныне|впредь|с этого момента|всегда|теперь)[\s,:!-]+)?"
_QUESTION_START = re.compile(
    r"^(?:do|does|did|can|could|would|should|will|shall|is|are|am|was|were|what|why|how|when|where|who|which|"
    r"have|has|may|might|ли|как|что|почему|зачем|когда|где|кто|какой|какая|можно ли|можешь ли|а если)\b"
)


def _rule(pattern: str) -> re.Pattern[str]:
    return re.compile(r"^" + _FILLER + pattern)


#: (rule, topic or None): a topic of "{1}" takes the rule's first group (e.g. the allergen).
_RULES: Final[tuple[tuple[re.Pattern[str], str | None], ...]] = (
    (_rule(r"(?:always|never(?! mind)(?:\s+ever)?|don'?t ever|do not ever|you (?:should|must) (?:always|never))\b"),
     None),
    (_rule(r"(?:from now on|going forward|henceforth|in (?:the )?future|"
           r"for the rest of (?:this|our) (?:chat|conversation))\b"), None),
    (_rule(r"(?:всегда|никогда|впредь|отныне|с этого момента|с этой минуты|с сегодняшнего дня|"
           r"теперь всегда|больше никогда|ни в коем случае)(?!\w)"), None),
    (_rule(r"(?:i'?m|i am) allergic to (?:the )?(\w+)"), "allergy:{1}"),
    (_rule(r"i (?:have|'ve got|have got) (?:a |an )?(?:severe |bad )?(\w+) allergy\b"), "allergy:{1}"),
    (_rule(r"(?:i'?m|i am) (lactose|gluten|fructose|histamine) intolerant\b"), "intolerance:{1}"),
    (_rule(r"(?:i'?m|i am) (?:a |an )?(?:strict )?(?:vegetarian|vegan|pescatarian)\b"), "diet"),
    (_rule(r"(?:i'?m|i am) (?:a )?(?:diabetic|celiac|coeliac)\b"), "health"),
    (_rule(r"(?:my name is|my name's|call me|address me as|refer to me as|i go by)\b"), "name"),
    (_rule(r"(?:i live in|i'?m based in|i am based in|i moved to)\b"), "residence"),
    (_rule(r"my pronouns are\b"), "pronouns"),
    (_rule(r"у меня аллергия на (\w+)"), "allergy:{1}"),
    (_rule(r"у меня непереносимость (\w+)"), "intolerance:{1}"),
    (_rule(r"я (?:строгий |строгая )?(?:вегетарианец|вегетарианка|веган|веганка)(?!\w)"), "diet"),
    (_rule(r"(?:меня зовут|зови меня|называй меня|обращайся ко мне)(?!\w)"), "name"),
    (_rule(r"(?:я живу в|я переехала? в)(?!\w)"), "residence"),
)  # fmt: skip
#: A reply-language instruction: a verb of replying, then a language ("in German", "по-немецки", "на немецком").
_REPLY_VERB = re.compile(
    r"^" + _FILLER + _DURABLE + r"(?:(?:only |always )?(?:reply|answer|respond|write|speak|talk|translate)|"
    r"(?:всегда |только )?(?:отвечай|пиши|говори|общайся|разговаривай))\b"
)
_LANGUAGE_WORD = re.compile(r"(?:\bin (\w+)|по-(\w+)|на (\w+)(?: языке)?)")
_INDENT = re.compile(r"\b(?:indent\w*|tabs?|spaces|табы|табуляци\w*|пробел\w*|отступ\w*)(?!\w)")
_IMPERATIVE_INDENT = re.compile(r"^" + _FILLER + _DURABLE + r"(?:indent|use|используй|делай|ставь)\b")
_RETRACT = re.compile(
    r"^" + _FILLER + r"(?:forget (?:that|it|this|what|about|my|the|i)|never ?mind (?:that|what|my)|"
    r"ignore (?:that|my|the|what)|disregard|scratch that|cancel (?:that|my)|stop (?:calling|replying|answering|"
    r"using|writing|speaking)|you (?:can|may) (?:\w+ )*again|no need to \w+ anymore|you don'?t have to|"
    r"забудь|забей|отмени|отмена|не обращай внимания|больше не (?:надо|нужно)|можешь снова|можно снова|"
    r"перестань)"
)
_NAME = re.compile(r"\b(?:call(?:ing)? me|address(?:ing)? me|my name|называ\w* меня|зови меня|меня зовут)(?!\w)")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?;\n]+[.!?;\n]*")
_WORD = re.compile(r"\w{3,}")
_STOP: Final = frozenset(
    {
        "the",
        "and",
        "that",
        "this",
        "what",
        "with",
        "from",
        "you",
        "your",
        "about",
        "again",
        "anymore",
        "please",
        "always",
        "never",
        "forget",
        "ignore",
        "just",
        "have",
        "not",
        "don",
        "can",
        "stop",
        "use",
        "mind",
        "now",
        "any",
        "all",
        "for",
        "are",
        "was",
        "but",
        "его",
        "это",
        "того",
        "чтобы",
        "всегда",
        "никогда",
        "больше",
        "забудь",
        "можешь",
        "снова",
        "меня",
        "мне",
        "как",
        "что",
    }
)


@dataclass(frozen=True, slots=True)
class Detection:
    """What one message is, for standing instructions.

    Attributes:
        standing: it holds a durable instruction, preference or identity fact.
        topics: what a newer instruction on the same subject replaces (``reply-language``, ``name``...).
        retracts: it takes back an earlier instruction ("forget that").
        words: its content words (a retraction retracts the newest instruction sharing one).
    """

    standing: bool
    topics: frozenset[str] = frozenset()
    retracts: bool = False
    words: frozenset[str] = frozenset()


NOT_STANDING: Final = Detection(False)


def _sentences(text: str) -> list[tuple[str, bool]]:
    """The sentences of ``text``, lower-cased, each with whether it is a question."""
    plain = _FENCE.sub(" ", text).replace("ё", "е").replace("’", "'")
    out = []
    for raw in _SENTENCE.findall(plain.lower()):
        sentence = raw.strip()
        body = sentence.rstrip(".!?;\n ").strip(" \t\"'«»()*-–—")
        if body:
            out.append((body, sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(body))))
    return out


def _language_topic(sentence: str) -> str | None:
    if not _REPLY_VERB.match(sentence):
        return None
    for found in _LANGUAGE_WORD.finditer(sentence):
        word = next(g for g in found.groups() if g)
        if any(word.startswith(stem) for stem in _LANGUAGES):
            return "reply-language"
    return None


def _topics(sentence: str, retraction: bool = False) -> set[str]:
    """The subjects a sentence speaks about, whether or not it is an instruction (a retraction's also from a
    mention of the user's name: "stop calling me Ada", while "don't ever call me buddy" adds no name)."""
    topics = set()
    if _language_topic(sentence) is not None:
        topics.add("reply-language")
    if _INDENT.search(sentence):
        topics.add("indentation")
    if retraction and _NAME.search(sentence):
        topics.add("name")
    for rule, topic in _RULES:
        found = rule.match(sentence)
        if found and topic:
            topics.add(topic.replace("{1}", found.group(1)) if found.groups() else topic)
    return topics


def detect(text: str) -> Detection:
    """Whether a user's message is a standing instruction or a retraction, by the rules of this module.

    Args:
        text: the message text.

    Returns:
        A :class:`Detection`: ``standing`` with its topics, or ``retracts``, or neither.

    Examples:
        >>> detect("From now on, reply in German.").topics
        frozenset({'reply-language'})
        >>> detect("У меня аллергия на орехи.").standing
        True
        >>> detect("I always wanted to visit Rome.").standing
        False
        >>> detect("Should I always use tabs?").standing
        False
        >>> detect("Forget that.").retracts
        True
    """
    if not text or len(text) > MAX_STANDING_CHARS:
        return NOT_STANDING
    sentences = _sentences(text)
    words = frozenset(w for w in _WORD.findall(_FENCE.sub(" ", text).lower().replace("ё", "е")) if w not in _STOP)
    if any(_RETRACT.match(s) for s, question in sentences if not question):
        about = set().union(*(_topics(s, retraction=True) for s, _ in sentences))
        return Detection(False, frozenset(about), retracts=True, words=words)
    standing = False
    topics: set[str] = set()
    for sentence, question in sentences:
        if question:
            continue
        found = _topics(sentence)
        durable = any(rule.match(sentence) for rule, _ in _RULES) or sentence.endswith(
            ("from now on", "going forward", "с этого момента", "отныне", "впредь")
        )
        durable = durable or "reply-language" in found
        durable = durable or ("indentation" in found and bool(_IMPERATIVE_INDENT.match(sentence)))
        if durable:
            standing = True
            topics |= found
    return Detection(standing, frozenset(topics), words=words) if standing else NOT_STANDING


def _detect(message: Message) -> Detection:
    flag = message.meta.get(STANDING_KEY)
    if message.role != "user" or message.source not in (None, "history"):
        return NOT_STANDING
    found = detect(message.text)
    if flag is False:
        return replace(found, standing=False)
    if flag is True and not found.standing:
        return Detection(True, found.topics, words=found.words)
    return found


def resolve(detections: Sequence[Detection]) -> list[int]:
    """The positions of the instructions still in force: conflicts go to the newest, retractions remove one.

    Args:
        detections: one per message, oldest first.

    Returns:
        Positions into ``detections`` of the active standing instructions, oldest first.
    """
    active: list[int] = []
    for position, found in enumerate(detections):
        if found.retracts:
            target = _retracted(detections, active, found)
            if target is not None:
                active.remove(target)
        elif found.standing:
            if found.topics:  # a newer instruction on a topic replaces every older one wholly on its topics
                active = [p for p in active if not detections[p].topics or not detections[p].topics <= found.topics]
            active.append(position)
    return active


def _retracted(detections: Sequence[Detection], active: list[int], retraction: Detection) -> int | None:
    """The instruction a retraction takes back: the newest on its topic, else the newest sharing a content
    word with it, else the newest."""
    newest_first = list(reversed(active))
    if not newest_first:
        return None
    on_topic = [p for p in newest_first if detections[p].topics & retraction.topics]
    sharing = [p for p in newest_first if detections[p].words & retraction.words]
    return (on_topic or sharing or newest_first)[0]


def active_standing(messages: Sequence[Message]) -> list[str]:
    """The ids of the user's standing instructions still in force in ``messages`` (see :func:`resolve`).

    A message's ``meta.standing`` overrides detection: False (dismissed) never counts, True always does.

    Args:
        messages: the conversation, oldest first, with ids.

    Returns:
        Their ids, oldest first.
    """
    detections = [_detect(m) for m in messages]
    return [messages[p].id for p in resolve(detections)]


def superseded(existing: Sequence[tuple[str, str]], text: str) -> list[str]:
    """The stored standing instructions a new user message ends (the service clears their flags).

    Args:
        existing: ``(id, text)`` of the chat's standing messages, oldest first.
        text: the new message.

    Returns:
        The ids of those it retracts or replaces (newest wins on a shared topic).
    """
    detections = [replace(found, standing=True, retracts=False) for found in (detect(t) for _, t in existing)]
    kept = resolve([*detections, detect(text)])
    return [existing[p][0] for p in range(len(existing)) if p not in kept]


@dataclass(frozen=True, slots=True)
class Protection:
    """Messages protected for one shift within a share of the budget.

    Attributes:
        messages: the prompt, with the chosen messages pinned (copies), in their places.
        chosen: the ids pinned here, in prompt order (candidates protected anyway are in neither list).
        left_out: the candidates that did not fit the share, in prompt order.
    """

    messages: list[Message]
    chosen: list[str]
    left_out: list[str]


def protect_within(
    messages: Sequence[Message],
    candidates: Iterable[str],
    count_tokens: Counter,
    limit: int,
    per_message_overhead: int = 4,
) -> Protection:
    """Pin ``candidates`` (best first) while their tool groups' tokens stay within ``limit``.

    A candidate whose group does not fit is skipped and the next tried (a smaller one may still fit). Already
    protected groups cost nothing here; the caller caps ``limit`` by what the protected context leaves of the
    budget (:func:`protected_tokens`).

    Args:
        messages: the prompt, with ids.
        candidates: ids to protect, in priority order (e.g. newest first).
        count_tokens: the shift's counter.
        limit: tokens the chosen groups may take.
        per_message_overhead: framing tokens per message for a plain callable counter.

    Returns:
        A :class:`Protection`.
    """
    prompt = Prompt(list(messages), count_tokens, per_message_overhead)
    wanted = [c for c in candidates if c in prompt.position]
    if not wanted:
        return Protection(list(prompt.messages), [], [])
    costs = prompt.costs
    used = 0
    roots: set[int] = set()
    chosen: set[str] = set()
    for message_id in wanted:
        root = prompt.root(prompt.position[message_id])
        if root in prompt.protected_roots:
            continue  # protected anyway: it keeps its own reason
        if root in roots:
            chosen.add(message_id)
            continue
        cost = sum(costs[p] for p in prompt.members(root))
        if used + cost <= limit:
            used += cost
            roots.add(root)
            chosen.add(message_id)
    out = [replace(m, pinned=True) if m.id in chosen and not m.protected else m for m in prompt.messages]
    order = prompt.position
    already = {c for c in wanted if prompt.root(order[c]) in prompt.protected_roots}
    return Protection(
        out,
        sorted(chosen, key=order.__getitem__),
        sorted((c for c in wanted if c not in chosen and c not in already), key=order.__getitem__),
    )


def protected_tokens(messages: Sequence[Message], count_tokens: Counter, per_message_overhead: int = 4) -> int:
    """Tokens of the protected groups of ``messages`` (what a share must leave room for)."""
    prompt = Prompt(list(messages), count_tokens, per_message_overhead)
    costs = prompt.costs
    return prompt.fixed + sum(costs[p] for p in prompt.protected_members)


def protect_standing(
    messages: Sequence[Message],
    standing_ids: Sequence[str],
    count_tokens: Counter,
    budget: int,
    per_message_overhead: int = 4,
    share: float = STANDING_SHARE,
) -> Protection:
    """Pin the standing instructions for a shift: newest first, within ``share`` of ``budget`` and within what
    the protected context leaves.

    Args:
        messages: the prompt, with ids.
        standing_ids: the active standing instructions' ids (:func:`active_standing`), oldest first.
        count_tokens: the shift's counter.
        budget: the shift's budget.
        per_message_overhead: framing tokens per message for a plain callable counter.
        share: the largest share of the budget they may take.

    Returns:
        A :class:`Protection`.
    """
    if not standing_ids:
        return Protection(list(messages), [], [])
    room = budget - protected_tokens(messages, count_tokens, per_message_overhead)
    limit = max(0, min(int(budget * share), room))
    return protect_within(messages, list(reversed(standing_ids)), count_tokens, limit, per_message_overhead)


def restore_standing(result: ShiftResult, protection: Protection | None, originals: Sequence[Message]) -> ShiftResult:
    """A shift's result with the messages as given (not the pinned copies) and the reason ``standing`` on the
    standing instructions it kept; no other message may claim that reason (a plugin's claim becomes
    ``context-shift``).

    Args:
        result: what the host returned for the prompt with the standing instructions pinned.
        protection: what :func:`protect_standing` chose, or None (standing instructions were not asked for).
        originals: the prompt as given.

    Returns:
        The result to hand back.
    """
    if protection is None and STANDING not in result.reasons.values():
        return result  # the common case, at the cost of one scan
    chosen = set(protection.chosen) if protection is not None else set()
    reasons = {
        mid: (STANDING if mid in chosen and why == PROTECTED else CONTEXT_SHIFT if why == STANDING else why)
        for mid, why in result.reasons.items()
    }
    given = {m.id: m for m in originals if m.id in chosen}
    diagnostics = list(result.diagnostics)
    if protection is not None and protection.chosen:
        diagnostics.append(f"{len(protection.chosen)} standing instruction(s) kept as protected context")
    if protection is not None and protection.left_out:
        diagnostics.append(f"{len(protection.left_out)} standing instruction(s) did not fit their share of the budget")
    return replace(
        result,
        kept=[given.get(m.id, m) for m in result.kept],
        excluded=[given.get(m.id, m) for m in result.excluded],
        reasons=reasons,
        diagnostics=diagnostics,
    )


__all__ = [
    "MAX_STANDING_CHARS",
    "NOT_STANDING",
    "STANDING_KEY",
    "STANDING_SHARE",
    "Detection",
    "Protection",
    "active_standing",
    "detect",
    "protect_standing",
    "protect_within",
    "protected_tokens",
    "resolve",
    "restore_standing",
    "superseded",
]
