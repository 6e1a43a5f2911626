"""Generated conversations for ``benchmarks/fidelity.py``: planted facts among look-alike chatter, seeded.

A fact is a project's vault code (a deploy port for the ``workspaces`` family), a value unique in its
conversation. Chatter is full of names and numbers too, and some of it looks like a fact: the vault code of a
project nobody asks about, the parking code or ticket count of a project that is asked about. Facts stand at
random places in the history, so about as many are old as are recent.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from contextshift import Message, ToolCall

FAMILIES = ("planted", "superseded", "tool-results", "workspaces", "pairs")
HISTORY = 300
FACTS = 16
TOOL_FACTS = 12
SYSTEM = "You are a helpful assistant for a small engineering team."

_SYLLABLES = ("ka", "lo", "mi", "ra", "te", "vo", "zen", "dra", "sul", "bor", "qui", "nex", "pha", "tor", "wy", "gal")
_CITIES = ("Lisbon", "Oslo", "Kyoto", "Lima", "Perth", "Quito", "Tunis", "Riga", "Hanoi", "Accra")
_PEOPLE = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Julia", "Kofi", "Lena")
_CHATTER = (
    "{p} said the train to {c} leaves at {h}:{m}, so we should hurry.",
    "I paid {n} euros for lunch with {p} yesterday.",
    "Did {p} finish the report on the {c} office? It had {n} pages.",
    "The weather in {c} was {t} degrees today.",
    "Remember that {p} prefers tea over coffee.",
    "We booked {n} rooms at the {c} hotel for the workshop.",
    "{p} will call back around {h}:{m} about the invoice for {n} units.",
    "The meeting with {p} moved to room {n} on the {t}th floor.",
    "Sure, I can help with that.",
    "That sounds good to me, thanks!",
    "Let me think about it for a moment.",
    "Our flight to {c} is number {n}, boarding at gate {t}.",
)
_LOOKALIKE = (
    "The vault code for project {o} is {v}.",
    "The parking code for project {a} is {v}.",
    "Project {a} has {n} open tickets and {t} reviewers.",
    "The badge number for {p} on project {a} is {v}.",
)
_LEADS = ("By the way, t", "Note: t", "For the record, t", "T", "Quick update: t")
_REPLIES = ("I looked it up.", "Here is what the lookup returned.", "Done, the record is in.", "Got it.")


@dataclass
class Case:
    """One conversation and one input: the values the input asks for, and every fact's latest value."""

    system: Message
    history: list[Message]
    question: Message
    values: list[str]
    all_values: list[str] = field(default_factory=list)


class _Gen:
    def __init__(self, family: str, seed: int) -> None:
        self.rng = random.Random(f"{family}-{seed}")
        self.used: set[str] = set()
        names: list[str] = []
        while len(names) < 3 * FACTS:
            name = "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 3))).capitalize()
            if name not in names:
                names.append(name)
        self.asked, self.others = names[:FACTS], names[FACTS:]
        self.serial = 0

    def value(self) -> str:
        while True:
            value = str(self.rng.randint(10_000, 99_999))
            if value not in self.used:
                self.used.add(value)
                return value

    def sentence(self) -> str:
        rng = self.rng
        template = rng.choice(_LOOKALIKE) if rng.random() < 0.2 else rng.choice(_CHATTER)
        return template.format(
            p=rng.choice(_PEOPLE),
            c=rng.choice(_CITIES),
            h=rng.randint(6, 22),
            m=f"{rng.randint(0, 59):02d}",
            n=rng.randint(2, 400),
            t=rng.randint(2, 40),
            o=rng.choice(self.others),
            a=rng.choice(self.asked),
            v=self.value(),
        )

    def chatter_sentence(self) -> str:
        rng = self.rng
        return rng.choice(_CHATTER).format(
            p=rng.choice(_PEOPLE),
            c=rng.choice(_CITIES),
            h=rng.randint(6, 22),
            m=f"{rng.randint(0, 59):02d}",
            n=rng.randint(2, 400),
            t=rng.randint(2, 40),
        )

    def chatter(self, sentences: int | None = None) -> str:
        return " ".join(self.sentence() for _ in range(sentences or self.rng.randint(1, 3)))

    def message(self, position: int, text: str, workspace: str | None = None) -> Message:
        self.serial += 1
        role = "user" if position % 2 == 0 else "assistant"
        return Message(role=role, content=text, id=f"h{self.serial}", source="history", workspace=workspace)

    def fact_text(self, name: str, value: str, what: str = "vault code for project") -> str:
        lead = self.rng.choice(_LEADS)
        text = f"{lead}he {what} {name} is {value}."
        return f"{self.chatter(1)} {text}" if self.rng.random() < 0.5 else f"{text} {self.chatter(1)}"


def _question(names: list[str], what: str = "vault codes for projects") -> Message:
    listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    return Message(role="user", content=f"What are the {what} {listed}?", id="question", source="input")


def _system() -> Message:
    return Message(role="system", content=SYSTEM, id="system")


def _plain(gen: _Gen, slots: dict[int, str], workspaces: list[str] | None = None) -> list[Message]:
    out = []
    for position in range(HISTORY):
        text = slots.get(position) or gen.chatter()
        out.append(gen.message(position, text, workspaces[position] if workspaces else None))
    return out


def _positions(gen: _Gen, count: int, low: int = 0, high: int = HISTORY - 4) -> list[int]:
    return sorted(gen.rng.sample(range(low, high), count))


def planted(seed: int) -> list[Case]:
    gen = _Gen("planted", seed)
    values = [gen.value() for _ in gen.asked]
    slots = {}
    for position, name, value in zip(_positions(gen, FACTS), gen.asked, values, strict=True):
        slots[position] = gen.fact_text(name, value)
    history = _plain(gen, slots)
    return [Case(_system(), history, _question(gen.asked), values, values)]


def superseded(seed: int) -> list[Case]:
    gen = _Gen("superseded", seed)
    first = [gen.value() for _ in gen.asked]
    latest = list(first)
    slots: dict[int, str] = {}
    positions = _positions(gen, FACTS, 0, int(HISTORY * 0.6))
    for position, name, value in zip(positions, gen.asked, first, strict=True):
        slots[position] = gen.fact_text(name, value)
    for index in gen.rng.sample(range(FACTS), FACTS // 2):
        later = [p for p in range(positions[index] + 2, HISTORY - 4) if p not in slots]
        at = gen.rng.choice(later)
        latest[index] = gen.value()
        name = gen.asked[index]
        slots[at] = gen.rng.choice(
            (
                f"Update: the vault code for project {name} changed to {latest[index]}.",
                f"Heads up, project {name}'s vault code is now {latest[index]}.",
            )
        )
    history = _plain(gen, slots)
    return [Case(_system(), history, _question(gen.asked, "current vault codes for projects"), latest, latest)]


def _lookup(gen: _Gen, name: str, value: str | None) -> list[Message]:
    """An assistant's lookup call, its JSON result (the code somewhere in it) and a reply without the code."""
    rng = gen.rng
    gen.serial += 1
    call_id = f"call_{gen.serial}"
    notes = ""
    length = rng.choice((150, 250, 400, 600, 150, 250, 400, 2600))
    while len(notes) < length:  # notes about the project itself: plain chatter, no look-alikes
        notes += gen.chatter_sentence() + " "
    fields: list[tuple[str, object]] = [
        ("project", name),
        ("owner", rng.choice(_PEOPLE)),
        ("status", rng.choice(("active", "paused", "review"))),
        ("open_tickets", rng.randint(0, 90)),
        ("notes", notes.strip()),
    ]
    code = value if value is not None else gen.value()
    fields.insert(rng.randint(1, len(fields)), ("vault_code", int(code)))
    call = Message(
        role="assistant",
        content="",
        id=f"h{gen.serial}-call",
        tool_calls=(ToolCall(id=call_id, name="lookup_project", arguments=json.dumps({"project": name})),),
        source="history",
    )
    result = Message(
        role="tool",
        content=json.dumps(dict(fields)),
        id=f"h{gen.serial}-result",
        tool_call_id=call_id,
        source="history",
    )
    reply = Message(role="assistant", content=rng.choice(_REPLIES), id=f"h{gen.serial}-reply", source="history")
    return [call, result, reply]


def tool_results(seed: int) -> list[Case]:
    gen = _Gen("tool-results", seed)
    asked = gen.asked[:TOOL_FACTS]
    values = [gen.value() for _ in asked]
    lookups: dict[int, tuple[str, str | None]] = {}
    positions = _positions(gen, TOOL_FACTS + 8, 0, HISTORY // 2 - 4)
    names: list[tuple[str, str | None]] = [*zip(asked, values, strict=True)]
    names += [(gen.rng.choice(gen.others), None) for _ in range(8)]
    gen.rng.shuffle(names)
    for position, item in zip(positions, names, strict=True):
        lookups[position] = item
    history: list[Message] = []
    position = 0
    while len(history) < HISTORY:
        if position in lookups:
            name, value = lookups[position]
            history.append(gen.message(0, f"Can you look up project {name}?"))
            history.extend(_lookup(gen, name, value))
        else:
            history.append(gen.message(len(history), gen.chatter()))
        position += 1
    return [Case(_system(), history, _question(asked), values, values)]


def workspaces(seed: int) -> list[Case]:
    gen = _Gen("workspaces", seed)
    values = [gen.value() for _ in gen.asked]
    spaces = ("frontend", "backend", "infra")
    where: list[str] = []
    while len(where) < HISTORY:
        where.extend([gen.rng.choice(spaces)] * gen.rng.randint(6, 20))
    where = where[:HISTORY]
    slots = {}
    for position, name, value in zip(_positions(gen, FACTS), gen.asked, values, strict=True):
        slots[position] = gen.fact_text(name, value, f"deploy port in {where[position]} for service")
    history = _plain(gen, slots, where)
    return [Case(_system(), history, _question(gen.asked, "deploy ports for services"), values, values)]


def pairs(seed: int) -> list[Case]:
    gen = _Gen("pairs", seed)
    values = [gen.value() for _ in gen.asked]
    slots = {}
    for position, name, value in zip(_positions(gen, FACTS), gen.asked, values, strict=True):
        slots[position] = gen.fact_text(name, value)
    history = _plain(gen, slots)
    order = list(range(FACTS))
    gen.rng.shuffle(order)
    cases = []
    for a, b in zip(order[::2], order[1::2], strict=True):
        question = Message(
            role="user",
            content=f"Compare the vault codes of projects {gen.asked[a]} and {gen.asked[b]}: which one is larger?",
            id="question",
            source="input",
        )
        cases.append(Case(_system(), history, question, [values[a], values[b]], values))
    return cases


#: ``paraphrase``: a fact, and a question that asks for it in other words (no word in common once stop words
#: are dropped and the rest stemmed; ``tests/core/test_embeddings.py`` checks it), so BM25 cannot find it.
PARAPHRASES = (
    ("The combination of the gym locker is {v}.", "Which digits open the cabinet I use at the fitness centre?"),
    ("The burglar alarm PIN at the cottage is {v}.", "How do I switch off the intruder siren at our holiday house?"),
    ("Our wifi password at the office is {v}.", "How can I get a laptop online at work?"),
    ("Julia's passport number is {v}.", "Which identifier does her travel document carry?"),
    ("The car's licence plate reads {v}.", "What registration does our vehicle show?"),
    ("Grandma's landline is {v}.", "How do I ring my grandmother at home?"),
    ("The bike lock code is {v}.", "What opens the chain on my bicycle?"),
    ("The hotel booking reference is {v}.", "Which confirmation did the inn we stay at send?"),
    ("The apartment door code downstairs is {v}.", "How do I get into our flat building at the entrance?"),
    ("The vet said the dog weighs {v} grams.", "How heavy is our puppy according to the animal clinic?"),
    ("The insurance policy number is {v}.", "What identifies the coverage contract protecting our household?"),
    ("Flight {v} leaves tomorrow morning.", "Which plane are we catching?"),
    ("The printer's IP address ends in {v}.", "How do I reach the copier on the network?"),
    ("The bank card PIN is {v}.", "What do I type at the cash machine?"),
    ("The library card number is {v}.", "What do I need to borrow books?"),
    ("The tax office case file is {v}.", "Which reference do the revenue authorities use for our dossier?"),
)


def paraphrase(seed: int) -> list[Case]:
    gen = _Gen("paraphrase", seed)
    values = [gen.value() for _ in PARAPHRASES]
    slots = {}
    for position, (fact, _), value in zip(_positions(gen, len(PARAPHRASES)), PARAPHRASES, values, strict=True):
        lead = gen.rng.choice(_LEADS)
        text = fact.format(v=value)
        text = f"{lead}{text[1:]}" if lead.endswith("t") and text.startswith("The ") else text
        slots[position] = f"{gen.chatter(1)} {text}" if gen.rng.random() < 0.5 else f"{text} {gen.chatter(1)}"
    history = _plain(gen, slots)
    return [
        Case(_system(), history, Message(role="user", content=question, id="question", source="input"), [v], values)
        for (_, question), v in zip(PARAPHRASES, values, strict=True)
    ]


#: Families that only relevance by meaning (the ``embeddings`` extra) can serve; not in the issue's targets.
MEANING_FAMILIES = ("paraphrase",)


def generate(family: str, seed: int) -> list[Case]:
    maker = {
        "planted": planted,
        "superseded": superseded,
        "tool-results": tool_results,
        "workspaces": workspaces,
        "pairs": pairs,
        "paraphrase": paraphrase,
    }[family]
    return maker(seed)
