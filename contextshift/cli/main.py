"""``contextshift`` entry point: one sub-command per adapter."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import preview, serve, token, worker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextshift",
        description="Keep long LLM conversations inside a model's context window.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(commands)
    preview.add_parser(commands)
    token.add_parser(commands)
    worker.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as leaving:  # argparse exits 2 on bad usage; keep that as our "bad input" code
        return int(leaving.code or 0)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
