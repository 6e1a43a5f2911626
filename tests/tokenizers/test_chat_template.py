"""T1/T2: an ``hf:`` profile counts a prompt with the model's own chat template, not a fixed frame.

The tokenizer is a real ``tokenizers`` word-level model written to disk, with ChatML's special tokens and
SmolLM2-135M-Instruct's chat template (which adds a default system prompt when there is none).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from contextshift.core import Message
from contextshift.tokenizers import HuggingFaceProfile, get_tokenizer
from contextshift.tokenizers.chat_template import renderer

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def write_model(directory: Path, template: str | None) -> Path:
    words = ["hello", "hi", "there", "how", "are", "you", "?", ",", ".", "the", "cat", "sat", "on", "mat"]
    words += ["user", "assistant", "system"]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tokenizer.json"
    tokenizer.save(str(path))
    config: dict[str, object] = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    if template is not None:
        config["chat_template"] = template
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def exact(path: Path, messages: list[Message]) -> int:
    config = json.loads(path.with_name("tokenizer_config.json").read_text(encoding="utf-8"))
    rendered = renderer(config)([{"role": m.role, "content": m.text} for m in messages], True)
    return len(Tokenizer.from_file(str(path)).encode(rendered, add_special_tokens=False).ids)


CHAT = [
    Message("user", "hello , how are you ?"),
    Message("assistant", "the cat sat on the mat ."),
    Message("user", "hi there"),
]


def test_the_template_is_measured_and_counts_a_prompt_exactly(tmp_path: Path) -> None:
    path = write_model(tmp_path / "smollm2", SMOLLM2_TEMPLATE)
    profile = HuggingFaceProfile(path)
    assert profile.template_measured
    assert profile.tokens_per_message == 3  # <|im_start|>, the role, <|im_end|>
    assert profile.count_messages(CHAT) == exact(path, CHAT)
    assert profile.count_messages(CHAT[:1]) == exact(path, CHAT[:1])


def test_a_template_that_adds_a_default_system_prompt_never_undercounts(tmp_path: Path) -> None:
    path = write_model(tmp_path / "smollm2", SMOLLM2_TEMPLATE)
    profile = get_tokenizer(f"hf:{path}")
    with_system = [Message("system", "be brief ."), *CHAT]
    assert exact(path, with_system) <= profile.count_messages(with_system) <= exact(path, with_system) + 16


@pytest.mark.parametrize("template", [None, "{% for m in messages %}{{ m.content", "{{ raise_exception('no') }}"])
def test_without_a_usable_template_the_default_frame_stays(tmp_path: Path, template: str | None) -> None:
    profile = HuggingFaceProfile(write_model(tmp_path / "plain", template))
    assert not profile.template_measured
    assert (profile.tokens_per_message, profile.reply_priming) == (5, 3)
