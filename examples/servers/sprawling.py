"""files-sprawl: a file server with many fine-grained, verbosely described tools.

This is the "before" picture of the fixed-tax story: fifteen narrow tools whose names,
descriptions and schemas are all sent to the model on every request, and a ``write_file`` that
only accepts the whole file's text as an argument (no reference, no hash check), so an agent has
to re-type the content. ``--grown`` serves the next release, which adds four more verbose tools.

Run: ``python -m examples.servers.sprawling --transport stdio|http [--port N] [--root DIR]
[--grown] [--page-size N]``.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat as stat_module
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from examples.servers._common import (
    Sandbox,
    build_arg_parser,
    parse_options,
    root_directory,
    run_server,
)
from examples.servers.sprawling_args import EncodingArg, PathArg
from examples.servers.sprawling_grown import add_grown_tools

SERVER_NAME = "files-sprawl"
VERSION = "1.4.0"
GROWN_VERSION = "1.5.0"

# Bounds on what one call may return, so a listing of a huge tree stays a sane tool result.
MAX_LISTED_ENTRIES = 2000
MAX_SEARCH_HITS = 500


def _format_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def build_server(root: Path, *, grown: bool = False) -> MCPServer:
    sandbox = Sandbox(root)
    server = MCPServer(
        SERVER_NAME,
        title="Sprawling file server",
        version=GROWN_VERSION if grown else VERSION,
        instructions=(
            "This server exposes the files under its root directory through many specialised tools. "
            "Pick the most specific tool for each task: read_file for whole files, read_file_chunked "
            "for large files, list_directory for one level and list_directory_recursive for trees."
        ),
    )

    def existing_file(path: str) -> Path:
        real = sandbox.resolve(path)
        if not real.is_file():
            raise ToolError(f"{path!r} is not an existing regular file")
        return real

    def existing_dir(path: str) -> Path:
        real = sandbox.resolve(path)
        if not real.is_dir():
            raise ToolError(f"{path!r} is not an existing directory")
        return real

    @server.tool(
        description=(
            "Read the complete contents of a single file from the file system and return them as UTF-8 "
            "text. Use this tool when you need to examine the full contents of one file, for example to "
            "understand source code, review configuration, or inspect a document. The file must exist "
            "and must be a regular file inside the server's root directory. If the file is very large, "
            "consider read_file_chunked instead, which returns a bounded slice of the file. If the file "
            "is not valid UTF-8, use read_file_with_encoding and name the encoding explicitly."
        )
    )
    def read_file(path: PathArg) -> str:
        try:
            return existing_file(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"{path!r} is not valid UTF-8 ({exc}); use read_file_with_encoding") from exc

    @server.tool(
        description=(
            "Read a bounded slice of a file, starting at a given byte offset and returning at most a given "
            "number of bytes, decoded as UTF-8 text. This is the recommended way to read large files, log "
            "files, or data files that would not fit comfortably in a single response. Call it repeatedly "
            "with increasing offsets to walk through a file. The response tells you the total size of the "
            "file so you can tell when you have reached the end. Slices that split a multi-byte character "
            "are decoded with replacement characters at the edges."
        )
    )
    def read_file_chunked(
        path: PathArg,
        offset: Annotated[
            int, Field(ge=0, description="Zero-based byte offset at which the slice starts.")
        ] = 0,
        length: Annotated[
            int,
            Field(ge=1, le=1_048_576, description="Maximum number of bytes to return (1 byte to 1 MiB)."),
        ] = 65_536,
    ) -> str:
        real = existing_file(path)
        size = real.stat().st_size
        with real.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        end = offset + len(data)
        header = f"[bytes {offset}-{end} of {size}{'; end of file' if end >= size else ''}]\n"
        return header + data.decode("utf-8", errors="replace")

    @server.tool(
        description=(
            "Read the complete contents of a file that is stored in a character encoding other than "
            "UTF-8, decoding it with the encoding you name. Use this for legacy files such as Windows "
            "code page documents, Latin-1 data exports or UTF-16 text produced by some Windows tools. "
            "The decoded text is returned as a normal string. If you do not know the encoding, try "
            "read_file first; it reports when a file is not valid UTF-8."
        )
    )
    def read_file_with_encoding(path: PathArg, encoding: EncodingArg = "utf-8") -> str:
        real = existing_file(path)
        try:
            return real.read_bytes().decode(encoding)
        except LookupError as exc:
            raise ToolError(f"unknown encoding {encoding!r}") from exc
        except UnicodeDecodeError as exc:
            raise ToolError(f"{path!r} cannot be decoded as {encoding}: {exc}") from exc

    @server.tool(
        description=(
            "List the entries of a single directory (not recursive). Each entry is returned on its own "
            "line, prefixed with [DIR] for directories and [FILE] for regular files, followed by the "
            "entry's name and, for files, its size in bytes. Entries are sorted by name. Use this tool to "
            "explore the structure of the file system one level at a time; use list_directory_recursive "
            "to see a whole tree at once."
        )
    )
    def list_directory(path: PathArg = ".") -> str:
        real = existing_dir(path)
        lines = []
        for entry in sorted(real.iterdir(), key=lambda p: p.name)[:MAX_LISTED_ENTRIES]:
            if entry.is_dir():
                lines.append(f"[DIR] {entry.name}")
            else:
                lines.append(f"[FILE] {entry.name} ({entry.lstat().st_size} bytes)")
        return "\n".join(lines) if lines else "(empty directory)"

    @server.tool(
        description=(
            "List every file and directory below a directory, recursively, as paths relative to the root "
            "directory, one per line, directories marked with a trailing slash. Optionally limit the depth "
            "of the walk. Use this tool to get an overview of a project's layout before deciding which "
            "files to read. Very large trees are cut off after a fixed number of entries, and the output "
            "says so when that happens."
        )
    )
    def list_directory_recursive(
        path: PathArg = ".",
        max_depth: Annotated[
            int, Field(ge=1, le=64, description="How many directory levels below the start to include.")
        ] = 16,
    ) -> str:
        start = existing_dir(path)
        lines: list[str] = []
        for current, dirnames, filenames in os.walk(start):
            depth = len(Path(current).relative_to(start).parts)
            dirnames.sort()
            if depth >= max_depth:
                dirnames.clear()
            for name in dirnames:
                lines.append(sandbox.relative(Path(current) / name) + "/")
            for name in sorted(filenames):
                lines.append(sandbox.relative(Path(current) / name))
            if len(lines) >= MAX_LISTED_ENTRIES:
                lines = lines[:MAX_LISTED_ENTRIES] + [f"... cut off after {MAX_LISTED_ENTRIES} entries"]
                break
        return "\n".join(lines) if lines else "(empty directory)"

    @server.tool(
        description=(
            "Return detailed metadata about a file or directory: its type, size in bytes, permissions in "
            "octal and symbolic form, and its creation, modification and access times in ISO 8601 format "
            "(UTC). Use this tool when you need to know how large a file is before reading it, when it "
            "was last changed, or whether it is a file or a directory. It does not read the contents."
        )
    )
    def stat_file(path: PathArg) -> dict[str, object]:
        real = sandbox.resolve(path)
        if not real.exists():
            raise ToolError(f"{path!r} does not exist")
        info = real.stat()
        return {
            "path": sandbox.relative(real),
            "type": "directory" if real.is_dir() else "file",
            "size": info.st_size,
            "mode_octal": oct(stat_module.S_IMODE(info.st_mode)),
            "mode": stat_module.filemode(info.st_mode),
            "modified": _format_time(info.st_mtime),
            "accessed": _format_time(info.st_atime),
            "changed": _format_time(info.st_ctime),
        }

    @server.tool(
        description=(
            "Search for files and directories whose names match a glob pattern (for example '*.py', "
            "'test_*' or '*.md'), starting at a directory and descending into all subdirectories. The "
            "match is made against the entry name only, not the full path, and is case-sensitive. Returns "
            "the matching paths relative to the root, one per line. Use search_file_contents instead when "
            "you are looking for text inside files."
        )
    )
    def search_files(
        pattern: Annotated[str, Field(description="Glob pattern matched against each entry's name.")],
        path: PathArg = ".",
    ) -> str:
        start = existing_dir(path)
        hits: list[str] = []
        for current, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in [*dirnames, *sorted(filenames)]:
                if fnmatch.fnmatchcase(name, pattern):
                    hits.append(sandbox.relative(Path(current) / name))
            if len(hits) >= MAX_SEARCH_HITS:
                break
        return "\n".join(hits[:MAX_SEARCH_HITS]) if hits else "(no matches)"

    @server.tool(
        description=(
            "Search the contents of text files for lines containing a given substring, starting at a "
            "directory and descending into all subdirectories. Optionally restrict the search to files "
            "whose names match a glob pattern. Returns one line per hit in the form path:line_number: "
            "line_text. Binary files and files that are not valid UTF-8 are skipped. The search is "
            "case-sensitive unless ignore_case is set."
        )
    )
    def search_file_contents(
        query: Annotated[str, Field(min_length=1, description="The text to look for in each line.")],
        path: PathArg = ".",
        file_pattern: Annotated[
            str, Field(description="Only search files whose names match this glob pattern.")
        ] = "*",
        ignore_case: Annotated[bool, Field(description="Match regardless of letter case.")] = False,
    ) -> str:
        start = existing_dir(path)
        needle = query.lower() if ignore_case else query
        hits: list[str] = []
        for current, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in sorted(filenames):
                if not fnmatch.fnmatchcase(name, file_pattern):
                    continue
                file_path = Path(current) / name
                try:
                    text = file_path.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                for number, line in enumerate(text.splitlines(), start=1):
                    haystack = line.lower() if ignore_case else line
                    if needle in haystack:
                        hits.append(f"{sandbox.relative(file_path)}:{number}: {line}")
                        if len(hits) >= MAX_SEARCH_HITS:
                            return "\n".join(hits)
        return "\n".join(hits) if hits else "(no matches)"

    @server.tool(
        description=(
            "Create a new file or completely overwrite an existing file with the text you provide in "
            "the content argument, encoded as UTF-8. Pass the entire desired contents of the file; the "
            "previous contents are replaced, not merged. Parent directories must already exist (use "
            "make_directory first). Use this tool with care, because overwriting a file cannot be undone. "
            "Returns a short confirmation with the number of bytes written."
        )
    )
    def write_file(
        path: PathArg,
        content: Annotated[str, Field(description="The complete new contents of the file, as text.")],
    ) -> str:
        real = sandbox.resolve(path)
        if not real.parent.is_dir():
            raise ToolError(f"the parent directory of {path!r} does not exist")
        data = content.encode("utf-8")
        real.write_bytes(data)
        return f"Wrote {len(data)} bytes to {sandbox.relative(real)}"

    @server.tool(
        description=(
            "Append text to the end of an existing file, encoded as UTF-8, without changing the content "
            "that is already there. If the file does not exist yet it is created. This is useful for "
            "adding entries to log files, notes, or lists. No newline is added automatically; include one "
            "at the end of the text if you need it. Returns the new size of the file in bytes."
        )
    )
    def append_file(
        path: PathArg,
        content: Annotated[str, Field(description="The text to add at the end of the file.")],
    ) -> str:
        real = sandbox.resolve(path)
        if not real.parent.is_dir():
            raise ToolError(f"the parent directory of {path!r} does not exist")
        with real.open("ab") as handle:
            handle.write(content.encode("utf-8"))
        return f"{sandbox.relative(real)} is now {real.stat().st_size} bytes"

    @server.tool(
        description=(
            "Copy a file from a source path to a destination path, both inside the root directory. The "
            "destination's parent directory must exist. If the destination already exists it is only "
            "overwritten when overwrite is true; otherwise the copy is refused. File permissions are "
            "copied along with the contents. Directories cannot be copied with this tool."
        )
    )
    def copy_file(
        source: PathArg,
        destination: PathArg,
        overwrite: Annotated[bool, Field(description="Replace the destination if it exists.")] = False,
    ) -> str:
        src = existing_file(source)
        dst = sandbox.resolve(destination)
        if dst.exists() and not overwrite:
            raise ToolError(f"{destination!r} already exists; pass overwrite=true to replace it")
        if not dst.parent.is_dir():
            raise ToolError(f"the parent directory of {destination!r} does not exist")
        shutil.copy2(src, dst)
        return f"Copied {sandbox.relative(src)} to {sandbox.relative(dst)}"

    @server.tool(
        description=(
            "Move or rename a file or directory from a source path to a destination path, both inside the "
            "root directory. The destination must not already exist. This can move entries between "
            "directories and rename them in one step. Use it to reorganise files; the original path no "
            "longer exists afterwards."
        )
    )
    def move_file(source: PathArg, destination: PathArg) -> str:
        src = sandbox.resolve(source)
        if not src.exists():
            raise ToolError(f"{source!r} does not exist")
        if src == sandbox.root:
            raise ToolError("the root directory itself cannot be moved")
        dst = sandbox.resolve(destination)
        if dst.exists():
            raise ToolError(f"{destination!r} already exists")
        shutil.move(src, dst)
        return f"Moved {source} to {sandbox.relative(dst)}"

    @server.tool(
        description=(
            "Delete a single file, or an empty directory, inside the root directory. Non-empty directories "
            "are refused to prevent accidental loss of data; delete their contents first. Deleting cannot "
            "be undone, so confirm the path with stat_file or list_directory before calling this tool."
        )
    )
    def delete_file(path: PathArg) -> str:
        real = sandbox.resolve(path)
        if real == sandbox.root:
            raise ToolError("the root directory itself cannot be deleted")
        if real.is_dir():
            try:
                real.rmdir()
            except OSError as exc:
                raise ToolError(f"{path!r} is a directory that is not empty") from exc
        elif real.exists():
            real.unlink()
        else:
            raise ToolError(f"{path!r} does not exist")
        return f"Deleted {path}"

    @server.tool(
        description=(
            "Create a new directory, including any missing parent directories, inside the root "
            "directory. If the directory already exists this is not an error. Use it before writing files "
            "into a directory structure that does not exist yet."
        )
    )
    def make_directory(path: PathArg) -> str:
        real = sandbox.resolve(path)
        if real.exists() and not real.is_dir():
            raise ToolError(f"{path!r} exists and is not a directory")
        real.mkdir(parents=True, exist_ok=True)
        return f"Directory {sandbox.relative(real)} is ready"

    @server.tool(
        description=(
            "Check whether a file or directory exists at a path inside the root directory, without reading "
            "it. Returns true or false. Use this tool to avoid errors before reading, writing or deleting, "
            "or to test whether a previous step created the expected output."
        )
    )
    def file_exists(path: PathArg) -> bool:
        return sandbox.resolve(path).exists()

    if grown:
        add_grown_tools(server, sandbox, existing_file, existing_dir)
    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_arg_parser("files-sprawl: an example MCP file server with many fine-grained tools")
    options = parse_options(parser, argv)
    with root_directory(options.root) as root:
        run_server(build_server(root, grown=options.grown), options)


if __name__ == "__main__":
    main()
