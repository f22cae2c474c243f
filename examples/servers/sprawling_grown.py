"""files-sprawl 1.5.0 (``--grown``): the tools the next release adds on top of 1.4.0."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from examples.servers._common import Sandbox, count_lines, sha256_hex
from examples.servers.sprawling_args import PathArg


def add_grown_tools(
    server: MCPServer,
    sandbox: Sandbox,
    existing_file: Callable[[str], Path],
    existing_dir: Callable[[str], Path],
) -> None:
    """The 1.5.0 release: four more verbose tools, the kind of change that silently raises the tax."""

    @server.tool(
        description=(
            "Compute cryptographic checksums of a file's exact bytes, for example to verify a download, to "
            "detect whether a file changed between two points in time, or to compare a file with a "
            "published digest. Supported algorithms are sha256 (the default), sha1 and md5; the digest is "
            "returned as lowercase hexadecimal along with the file's size in bytes and its line count. The "
            "sha256 value is the same as the output of 'shasum -a 256 FILE' on the command line."
        )
    )
    def compute_file_checksum(
        path: PathArg,
        algorithm: Annotated[
            str, Field(pattern="^(sha256|sha1|md5)$", description="Digest algorithm: sha256, sha1 or md5.")
        ] = "sha256",
    ) -> dict[str, object]:
        data = existing_file(path).read_bytes()
        return {
            "path": path,
            "algorithm": algorithm,
            "digest": hashlib.new(algorithm, data).hexdigest(),
            "bytes": len(data),
            "lines": count_lines(data),
        }

    @server.tool(
        description=(
            "Compare two text files line by line and report whether they are identical. When they differ, "
            "the result lists the first differing line numbers together with the text of both versions of "
            "each of those lines, up to a limit, plus the total number of differing lines. Use this tool to "
            "check whether an edit produced the intended result, or to compare a generated file against a "
            "reference copy, without reading both files in full."
        )
    )
    def compare_files(
        first: PathArg,
        second: PathArg,
        max_differences: Annotated[
            int, Field(ge=1, le=500, description="Maximum number of differing lines to describe.")
        ] = 20,
    ) -> dict[str, object]:
        a_bytes = existing_file(first).read_bytes()
        b_bytes = existing_file(second).read_bytes()
        a_lines = a_bytes.decode("utf-8", errors="replace").splitlines()
        b_lines = b_bytes.decode("utf-8", errors="replace").splitlines()
        differences = []
        total = 0
        for number in range(max(len(a_lines), len(b_lines))):
            left = a_lines[number] if number < len(a_lines) else None
            right = b_lines[number] if number < len(b_lines) else None
            if left != right:
                total += 1
                if len(differences) < max_differences:
                    differences.append({"line": number + 1, "first": left, "second": right})
        return {
            "identical": a_bytes == b_bytes,
            "sha256_first": sha256_hex(a_bytes),
            "sha256_second": sha256_hex(b_bytes),
            "differing_lines": total,
            "differences": differences,
        }

    @server.tool(
        description=(
            "Summarise a directory tree: the number of files and subdirectories, the total size in bytes, "
            "the largest files, and a breakdown of file counts and sizes by file extension. Use this tool "
            "to get a quick quantitative picture of an unfamiliar project, for example to find which kinds "
            "of files dominate it or which files are unexpectedly large, before exploring it in detail "
            "with list_directory or list_directory_recursive."
        )
    )
    def get_directory_tree_summary(
        path: PathArg = ".",
        largest: Annotated[
            int, Field(ge=1, le=100, description="How many of the largest files to list.")
        ] = 10,
    ) -> dict[str, object]:
        start = existing_dir(path)
        files: list[tuple[int, str]] = []
        directories = 0
        by_extension: dict[str, dict[str, int]] = {}
        for current, dirnames, filenames in os.walk(start):
            directories += len(dirnames)
            for name in filenames:
                file_path = Path(current) / name
                size = file_path.lstat().st_size
                files.append((size, sandbox.relative(file_path)))
                bucket = by_extension.setdefault(file_path.suffix or "(none)", {"files": 0, "bytes": 0})
                bucket["files"] += 1
                bucket["bytes"] += size
        files.sort(reverse=True)
        return {
            "files": len(files),
            "directories": directories,
            "total_bytes": sum(size for size, _ in files),
            "largest": [{"path": name, "bytes": size} for size, name in files[:largest]],
            "by_extension": by_extension,
        }

    @server.tool(
        description=(
            "Find files with identical contents below a directory by comparing sizes first and then sha256 "
            "digests of the candidates. Returns groups of paths that share the same contents, each with the "
            "shared size and digest, largest groups first. Use this tool to clean up copies, to detect "
            "vendored duplicates, or to check whether a file you are about to write already exists under "
            "another name."
        )
    )
    def find_duplicate_files(path: PathArg = ".") -> list[dict[str, object]]:
        start = existing_dir(path)
        by_size: dict[int, list[Path]] = {}
        for current, _dirnames, filenames in os.walk(start):
            for name in filenames:
                file_path = Path(current) / name
                by_size.setdefault(file_path.lstat().st_size, []).append(file_path)
        groups: dict[str, list[Path]] = {}
        for candidates in by_size.values():
            if len(candidates) < 2:
                continue
            for candidate in candidates:
                groups.setdefault(sha256_hex(candidate.read_bytes()), []).append(candidate)
        duplicates = [
            {
                "sha256": digest,
                "bytes": paths[0].stat().st_size,
                "paths": sorted(sandbox.relative(p) for p in paths),
            }
            for digest, paths in groups.items()
            if len(paths) > 1
        ]
        duplicates.sort(key=lambda group: len(group["paths"]), reverse=True)  # type: ignore[arg-type]
        return duplicates
