"""``contextshift preview FILE.json --budget N``: shift a conversation file and show what was kept.

Exit codes: 0 the conversation fits (after shifting), 3 ``TOKEN_BUDGET_EXCEEDED``, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..core.errors import TokenBudgetExceeded
from ..core.host import shift_with_strategy
from ..core.messages import Message, normalize_messages
from ..core.shifting import ShiftResult
from ..core.tokens import TokenizerProfile, message_costs
from ..tokenizers import get_tokenizer

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_BUDGET = 3
PREVIEW_WIDTH = 60


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "preview",
        help="shift a JSON conversation into a token budget and show the result",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", type=Path, help='a JSON list of OpenAI-style messages, or {"messages": [...]}')
    parser.add_argument("--budget", type=int, required=True, help="the prompt budget in tokens")
    parser.add_argument("--strategy", default="truncate", help="truncate, summarize, vector-recall or manual")
    parser.add_argument("--model", default=None, help="count with this model's tokenizer (default: approximate)")
    parser.add_argument("--json", action="store_true", help="print the ShiftResult as JSON")
    parser.set_defaults(run=run)


def load_conversation(path: Path) -> list[Message]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise ValueError('the file must hold a list of messages or {"messages": [...]}')
    return normalize_messages(data)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        messages = load_conversation(args.file)
        profile = get_tokenizer(args.model)
        result = shift_with_strategy(messages, profile, args.budget, strategy=args.strategy)
    except TokenBudgetExceeded as error:
        print(
            f"TOKEN_BUDGET_EXCEEDED: the protected context needs {error.protected_tokens} tokens "
            f"but the budget is {error.budget}.",
            file=err,
        )
        return EXIT_BUDGET
    except (OSError, ValueError, TypeError) as error:
        print(f"bad input: {error}", file=err)
        return EXIT_BAD_INPUT
    if args.json:
        payload = result.to_dict()
        payload["tokenizer"] = {"profile": profile.name, "approximate": profile.approximate}
        json.dump(payload, out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        out.write(render_table(messages, result, profile))
    return EXIT_OK


def _preview(message: Message) -> str:
    text = " ".join(message.text.split())
    if not text and message.media_parts() != (0, 0):
        text = "[media]"
    return text if len(text) <= PREVIEW_WIDTH else text[: PREVIEW_WIDTH - 1] + "…"


def render_table(messages: list[Message], result: ShiftResult, profile: TokenizerProfile) -> str:
    costs, _ = message_costs(messages, profile, 4)
    kept = {m.id for m in result.kept}
    lines = [f"{'id':<16} {'role':<9} {'tokens':>7}  {'':1} {'reason':<14} content", "-" * 100]
    for message, cost in zip(messages, costs, strict=True):
        mark = "+" if message.id in kept else "-"
        reason = result.reasons.get(message.id, "")
        lines.append(f"{message.id[:16]:<16} {message.role:<9} {cost:>7}  {mark} {reason:<14} {_preview(message)}")
    for entry in result.truncated:
        replacement = entry.replacement
        lines.append(
            f"{replacement.id[:16]:<16} {replacement.role:<9} {entry.tokens_after:>7}  + {'summary':<14} "
            f"stands for {len(entry.source_ids)} message(s), {entry.tokens_before} tokens before"
        )
    lines.append("-" * 100)
    estimate = " (an estimate)" if profile.approximate else " (exact)"
    lines.append(
        f"strategy {result.strategy} | tokenizer {profile.name}{estimate} | "
        f"{result.tokens} / {result.budget} tokens | kept {len(result.kept)}, "
        f"excluded {len(result.excluded)}, summarized {sum(len(t.source_ids) for t in result.truncated)}"
    )
    for note in result.diagnostics:
        lines.append(f"  · {note}")
    return "\n".join(lines) + "\n"
