"""Ingest benchmark, the parts that scale: one large file on one and on two workers, and the cost
of a watched-file scan as the file grows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python scripts/bench_ingest_parallel.py --mb 500 --grow-mb 1 --watch-mb 1000

``two_worker_speed`` starts real ``celery worker`` processes (``--pool solo``, one task at a time
each, queue ``ingest``: what ``worker-ingest`` runs in production) on the configured broker and
database, queues the same generated envelope log once with one worker and once with two (each
time into a fresh team, so nothing is a duplicate), and times each from the task sent to the job
done. The file is split in ranges of INGEST_RANGE_BYTES (``--range-mb``) either way; with one
worker they are read one after the other.

``incremental_scan_cost`` follows a generated log in a watched folder through the folder scan
(``ingest.capture.watch.scan_all``, what the beat's scan task runs): the first scan reads the whole
file; then the file grows by ``grow_mb`` between scans, and each scan's time and bytes parsed
(``WatchedFile.last_scan_bytes``) are reported beside the first scan's.

Both functions expect Django to be set up (``bench_ingest.py`` calls them after its own set-up);
``main`` does it for a run of this script alone. ``--mb``/``--watch-mb`` make them run small.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_ingest import DEFAULT_DB, ensure_database  # noqa: E402
from benchlogs import generate  # noqa: E402

FRAMES_PER_MB = 178  # generate()'s mix: about 5.6 kB a frame on average


def write_log(path: Path, megabytes: float, *, tag: str, seed: int = 7) -> int:
    """A generated envelope log of about ``megabytes`` MB whose sessions are named after ``tag``
    (logs with different tags share no session, so nothing in one repeats the other); its size."""
    raw = path.with_suffix(".tmp")
    generate(raw, max(20, int(megabytes * FRAMES_PER_MB)), seed=seed)
    with open(raw, "rb") as src, open(path, "ab") as out:
        for line in src:
            out.write(line.replace(b'"session_id": "bench-', f'"session_id": "{tag}-'.encode(), 1))
    raw.unlink()
    return path.stat().st_size


def _start_workers(count: int, env: dict[str, str], logs: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(count):
        out = open(logs / f"worker-{count}-{i}.log", "ab")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo"]
                + ["-Q", "ingest", "--loglevel", "WARNING", "--without-mingle", "--without-gossip"]
                + ["--hostname", f"bench{count}-{i}-{os.getpid()}@%h"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    return procs


def _wait_ready(count: int, timeout: float = 120.0) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        if sum(1 for r in replies for name in r if name.startswith(f"bench{count}-")) >= count:
            return
    raise RuntimeError(f"{count} benchmark workers did not answer within {timeout:.0f} s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _timed_job(path: Path, workers: int, env: dict[str, str], logs: Path, timeout: float) -> dict[str, Any]:
    from config.celery import app
    from dashboard.teams.models import Team
    from ingest.capture.models import IngestJob
    from ingest.capture.pipeline import create_job

    team = Team.objects.create(name=f"bench {workers} workers {time.strftime('%H%M%S')} {os.getpid()}")
    job = create_job(team, source=IngestJob.Source.COMMAND, filename=path.name, path=path, format="envelope")
    procs = _start_workers(workers, env, logs)
    try:
        _wait_ready(workers)
        started = time.perf_counter()
        app.send_task("ingest.tasks.run_ingest_job", args=[job.pk])
        deadline = time.monotonic() + timeout
        while True:
            job.refresh_from_db()
            if job.status in (IngestJob.Status.DONE, IngestJob.Status.FAILED):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the job did not finish within {timeout:.0f} s (see {logs})")
            time.sleep(0.1)
        seconds = time.perf_counter() - started
    finally:
        _stop(procs)
    if job.status != IngestJob.Status.DONE or not job.reconciles:
        raise RuntimeError(f"the {workers}-worker run ended {job.status}: {job.error}")
    return {
        "seconds": seconds,
        "lines": job.lines_read,
        "calls": job.calls_stored,
        "ranges": IngestJob.objects.filter(parent=job).count(),
    }


def two_worker_speed(
    megabytes: float = 500, *, range_mb: float = 64, workdir: Path | None = None, timeout: float = 3600
) -> dict[str, Any]:
    """One generated log of about ``megabytes`` MB ingested by one, then two worker processes.

    Returns {"mb", "ranges", "one": {seconds, lines, calls, ranges}, "two": {...},
    "one_mb_s", "two_mb_s", "ratio"} (ratio = one-worker time / two-worker time)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="bench-parallel-"))
    path = workdir / "big.jsonl"
    path.unlink(missing_ok=True)
    size = write_log(path, megabytes, tag="par")
    env = dict(os.environ, INGEST_RANGE_BYTES=str(int(range_mb * 1024 * 1024)))
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    one = _timed_job(path, 1, env, workdir, timeout)
    two = _timed_job(path, 2, env, workdir, timeout)
    if (one["lines"], one["calls"]) != (two["lines"], two["calls"]):
        raise RuntimeError(f"the two runs disagree: {one} vs {two}")
    mb = size / 1e6
    path.unlink()
    return {
        "mb": mb,
        "ranges": two["ranges"],
        "one": one,
        "two": two,
        "one_mb_s": mb / one["seconds"],
        "two_mb_s": mb / two["seconds"],
        "ratio": one["seconds"] / two["seconds"],
    }


def incremental_scan_cost(
    megabytes: float = 1000, grow_mb: float = 1, scans: int = 3, *, workdir: Path | None = None
) -> dict[str, Any]:
    """A watched log of about ``megabytes`` MB scanned once, then grown by ``grow_mb`` MB before
    each of ``scans`` more scans. Returns {"first": {seconds, bytes}, "scans": [{seconds, bytes,
    appended, state_bytes}, ...], "time_ratio", "bytes_ratio"} (ratios: a later scan's median over
    the first scan)."""
    from django.conf import settings

    from dashboard.teams.models import Team
    from ingest.capture import watch
    from ingest.capture.models import WatchedFile, WatchedFolder

    workdir = Path(workdir or tempfile.mkdtemp(prefix="bench-watch-"))
    folder_path = workdir / "logs"
    folder_path.mkdir(exist_ok=True)
    path = folder_path / "live.jsonl"
    path.unlink(missing_ok=True)
    settings.INGEST_WATCH_DIRS = [str(workdir)]
    team = Team.objects.create(name=f"bench watch {time.strftime('%H%M%S')} {os.getpid()}")
    folder = WatchedFolder.objects.create(team=team, path=str(folder_path), pattern="*.jsonl")

    def scan() -> tuple[float, WatchedFile]:
        started = time.perf_counter()
        watch.scan_all(folder.pk)
        seconds = time.perf_counter() - started
        return seconds, WatchedFile.objects.get(folder=folder)

    size = write_log(path, megabytes, tag="watch0")
    first_s, watched = scan()
    first = {"seconds": first_s, "bytes": watched.last_scan_bytes, "file_bytes": size}
    later = []
    for i in range(1, scans + 1):
        before = path.stat().st_size
        write_log(path, grow_mb, tag=f"watch{i}", seed=7 + i)
        appended = path.stat().st_size - before
        seconds, watched = scan()
        later.append(
            {
                "seconds": seconds,
                "bytes": watched.last_scan_bytes,
                "appended": appended,
                "state_bytes": len(watched.pairing_state or b""),
            }
        )
    median = sorted(later, key=lambda s: s["seconds"])[len(later) // 2]
    path.unlink()
    return {
        "first": first,
        "scans": later,
        "time_ratio": median["seconds"] / first_s,
        "bytes_ratio": median["bytes"] / max(1, first["bytes"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500, help="size of the file for the worker runs")
    parser.add_argument("--range-mb", type=float, default=64, help="INGEST_RANGE_BYTES for them, in MiB")
    parser.add_argument("--watch-mb", type=float, default=1000, help="size of the watched file")
    parser.add_argument("--grow-mb", type=float, default=1, help="bytes appended between scans, in MB")
    parser.add_argument("--scans", type=int, default=3)
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-watch", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if os.environ["DATABASE_URL"].startswith("postgres"):
        ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)
    if not args.skip_workers:
        r = two_worker_speed(args.mb, range_mb=args.range_mb)
        print(
            f"one worker:  {r['one']['seconds']:7.2f} s  {r['one_mb_s']:6.2f} MB/s  ({r['mb']:.1f} MB, "
            f"{r['ranges']} ranges, {r['two']['calls']} calls)"
        )
        print(
            f"two workers: {r['two']['seconds']:7.2f} s  {r['two_mb_s']:6.2f} MB/s  ratio {r['ratio']:.2f}x"
        )
    if not args.skip_watch:
        w = incremental_scan_cost(args.watch_mb, args.grow_mb, args.scans)
        f = w["first"]
        print(
            f"first scan:  {f['seconds']:7.2f} s  {f['bytes'] / 1e6:8.2f} MB parsed of {f['file_bytes'] / 1e6:.1f} MB"
        )
        for s in w["scans"]:
            print(
                f"later scan:  {s['seconds']:7.3f} s  {s['bytes'] / 1e6:8.3f} MB parsed, "
                f"{s['appended'] / 1e6:.3f} MB appended, state {s['state_bytes'] / 1e3:.1f} kB"
            )
        print(f"later/first: time {w['time_ratio']:.4f}, bytes {w['bytes_ratio']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
