"""Mutation benchmark (not a CI step): how many planted bugs the tests covering each module kill.

    .venv/bin/pip install -e ".[mutation]"                 # cosmic-ray, once
    .venv/bin/python scripts/mutants.py                    # every listed module (hours on 2 cores)
    .venv/bin/python scripts/mutants.py --only mcptax/formats/state.py --limit 40

For each module, cosmic-ray (https://cosmic-ray.readthedocs.io) plants one mutation at a time and
runs the test files that cover that module (listed below), on SQLite; a mutant the tests fail on
is killed. cosmic-ray edits the files it mutates, so the run works on a copy of the tracked files
in a temporary directory, never on this checkout. Prints the killed share per module; the target
is at least 90% each (docs/development.md keeps the figures and the survivors' reasons).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# Module -> the test files that cover it.
COVERING: dict[str, list[str]] = {
    "mcptax/tokens.py": ["tests/mcptax/test_tokens.py", "tests/mcptax/test_profiles.py"],
    "mcptax/verdict_rules.py": ["tests/mcptax/test_verdict_rules.py"],
    "mcptax/formats/assemble.py": [
        "tests/mcptax/formats/test_assemble.py",
        "tests/mcptax/formats/test_duplicates.py",
        "tests/mcptax/formats/test_ranges.py",
    ],
    "mcptax/formats/state.py": ["tests/mcptax/formats/test_ranges.py"],
    "mcptax/outbound/policy.py": ["tests/mcptax/outbound/test_policy.py"],
    "dashboard/teams/permissions.py": [
        "tests/dashboard/teams/test_permissions.py",
        "tests/dashboard/teams/test_permissions_api.py",
    ],
    "dashboard/servers/models.py": ["tests/dashboard/servers/test_leases.py"],  # the poll lease helpers
    "dashboard/alerts/notify/delivery.py": ["tests/dashboard/servers/test_leases.py"],  # delivery leases
}


def copy_tree(target: Path) -> None:
    """The tracked files of this checkout (what a commit holds), nothing else."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(
        b"\0"
    )
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            (target / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name.decode())


def config(module: str, tests: list[str], timeout: float) -> str:
    command = f"{PYTHON} -m pytest -x -q -p no:cacheprovider -m 'not services and not browser' " + " ".join(
        tests
    )
    return (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def killed_share(session: Path) -> tuple[int, int, list[str]]:
    """(killed, judged, survivors) of a finished session (incompetent mutants, e.g. a syntax
    error, count as killed: the tests would not run)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    killed, judged, survivors = 0, 0, []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            judged += 1
            if result.test_outcome == TestOutcome.SURVIVED:
                mutation = item.mutations[0]
                survivors.append(f"{mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}")
            else:
                killed += 1
    return killed, judged, survivors


def sample(session: Path, limit: int, seed: int) -> None:
    """Keep a random `limit` of the session's mutants (a quick estimate of the share)."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.pending_work_items)
        if len(items) <= limit:
            return
        keep = {item.job_id for item in random.Random(seed).sample(items, limit)}
        db.clear()
        db.add_work_items([item for item in items if item.job_id in keep])


def run(module: str, tests: list[str], workdir: Path, limit: int | None, timeout: float) -> str:
    cfg = workdir / f"{module.replace('/', '_')}.toml"
    session = workdir / f"{module.replace('/', '_')}.sqlite"
    cfg.write_text(config(module, tests, timeout))
    env = {**os.environ, "VAR_DIR": str(workdir / "var"), "PYTHONPATH": str(workdir)}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    cosmic = [PYTHON, "-m", "cosmic_ray.cli"]
    subprocess.run([*cosmic, "init", str(cfg), str(session)], cwd=workdir, env=env, check=True)
    if limit:
        sample(session, limit, seed=29)
    subprocess.run([*cosmic, "exec", str(cfg), str(session)], cwd=workdir, env=env, check=True)
    killed, judged, survivors = killed_share(session)
    share = 100.0 * killed / judged if judged else 0.0
    lines = [f"{module}: {killed}/{judged} killed ({share:.1f}%)"]
    lines += [f"    survived: {s}" for s in survivors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="modules to run (default: every listed one)")
    parser.add_argument("--limit", type=int, default=None, help="a random sample of this many mutants each")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant's test run")
    options = parser.parse_args(argv)
    modules = options.only or list(COVERING)
    with tempfile.TemporaryDirectory(prefix="mcptax-mutants-") as tmp:
        workdir = Path(tmp)
        copy_tree(workdir)
        for module in modules:
            print(run(module, COVERING[module], workdir, options.limit, options.timeout), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
