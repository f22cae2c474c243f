"""Mutation benchmark (not a CI step): how many planted bugs the tests covering each module kill.

    .venv/bin/pip install -e ".[mutation]"                 # cosmic-ray, once
    .venv/bin/python scripts/mutants.py --count            # how many mutants each module has
    .venv/bin/python scripts/mutants.py --limit 60 --diffs  # a sample of 60 each (~45 min on 2 cores)
    .venv/bin/python scripts/mutants.py --only mcptax/formats/state.py --keep var/mutants

For each module, cosmic-ray (https://cosmic-ray.readthedocs.io) plants one mutation at a time and
runs the test files that cover that module (listed below), on SQLite; a mutant the tests fail on
is killed. cosmic-ray edits the files it mutates, so the run works on a copy of the tracked files
in a temporary directory, never on this checkout. Prints the killed share per module; the target
is at least 90% each (docs/development.md keeps the figures and the survivors' reasons).
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# Module -> the test files that cover it.
COVERING: dict[str, list[str]] = {
    "mcptax/tokens.py": [
        "tests/mcptax/test_tokens.py",
        "tests/mcptax/test_encoding_failures.py",
        "tests/mcptax/test_profiles.py",
        "tests/mcptax/test_bundled.py",
        # Lone surrogates cannot cross into the compiled tokenizer: tiktoken counts them instead.
        "tests/corpus/test_fast_tokenizer.py::test_lone_surrogates_are_counted_as_tiktoken_counts_them",
        # The compiled tokenizer is loaded without its package (a start-up cost, checked here).
        "tests/config/test_startup.py::test_counting_loads_bpe_openais_compiled_tokenizer_without_its_package",
    ],
    "mcptax/verdict_rules.py": [
        "tests/mcptax/test_verdict_rules.py",
        "tests/mcptax/test_verdict_hash_only.py",
    ],
    # Every log format goes through the assembler: its own tests first, then the formats'.
    "mcptax/formats/assemble.py": [
        "tests/mcptax/formats/test_assemble.py",
        "tests/mcptax/formats/test_duplicates.py",
        "tests/mcptax/formats/test_ranges.py",
        "tests/mcptax/formats/",
    ],
    "mcptax/formats/state.py": ["tests/mcptax/formats/test_state.py", "tests/mcptax/formats/test_ranges.py"],
    "mcptax/outbound/policy.py": ["tests/mcptax/outbound/test_policy.py"],
    # The table's rules without a request first (fast), then through every page.
    "dashboard/teams/permissions.py": [
        "tests/dashboard/teams/test_permission_rules.py",
        "tests/dashboard/teams/test_permissions_pages.py",
        "tests/dashboard/teams/test_permissions.py",
        "tests/dashboard/teams/test_permissions_api.py",
    ],
    # The lease helpers: their rules at the boundaries first (fast), then the dead-worker stories.
    "dashboard/servers/models.py": [
        "tests/dashboard/servers/test_lease_rules.py",
        "tests/dashboard/servers/test_leases.py",
    ],
    "dashboard/alerts/notify/delivery.py": [
        "tests/dashboard/servers/test_lease_rules.py",
        "tests/dashboard/servers/test_leases.py",
    ],
}

# Modules of which only these functions are mutated (the lease helpers; the rest of the module
# is covered by other benchmarks' tests, or none).
ONLY_IN: dict[str, set[str]] = {
    "dashboard/servers/models.py": {"poll_lock_stale_after", "lock_free", "is_polling", "lock_is_stale"},
    "dashboard/alerts/notify/delivery.py": {"lock_stale_after", "unlocked", "claim", "sweep_pending"},
}

# Extra pytest options per module. The lease helpers change no table, so their tests build the
# schema from the models (pytest-django's --nomigrations: half the cost of each mutant's run);
# `makemigrations --check` keeps the models and the migrations in step.
PYTEST_ARGS: dict[str, list[str]] = {
    "dashboard/servers/models.py": ["--nomigrations"],
    "dashboard/alerts/notify/delivery.py": ["--nomigrations"],
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
    options = ["-x", "-q", "-p", "no:cacheprovider", "-m", "'not services and not browser'"]
    command = " ".join([PYTHON, "-m", "pytest", *options, *PYTEST_ARGS.get(module, []), *tests])
    return (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def killed_share(session: Path, diffs: bool) -> tuple[int, int, list[str]]:
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
                line = f"{mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name}"
                survivors.append(line + ("\n" + (result.diff or "") if diffs else ""))
            else:
                killed += 1
    return killed, judged, survivors


Span = tuple[tuple[int, int], tuple[int, int]]


def _span(node: ast.AST) -> Span:
    return (node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0)


def annotation_spans(tree: ast.AST) -> list[Span]:
    """Where the module's annotations are. With `from __future__ import annotations` (every module
    here) they are strings nobody evaluates at run time, so a mutation there (`X | None` made
    `X / None`) is an equivalent mutant by construction: it is not run."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            spans.append(_span(node.annotation))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            spans.append(_span(node.returns))
    return spans


def function_spans(tree: ast.AST, names: set[str]) -> list[Span]:
    return [
        _span(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names
    ]


def _inside(position: tuple[int, int], spans: list[Span]) -> bool:
    return any(start <= position < end for start, end in spans)


def select(session: Path, source: Path, module: str, limit: int | None, seed: int) -> tuple[int, int, int]:
    """Drop the mutants in annotations, those outside ONLY_IN's functions, then keep a random
    `limit` of the rest (a seeded sample). Returns the mutants cosmic-ray made, those left after
    the filters, and those kept."""
    from cosmic_ray.work_db import WorkDB, use_db

    tree = ast.parse(source.read_text())
    skip = annotation_spans(tree)
    within = function_spans(tree, ONLY_IN[module]) if module in ONLY_IN else None
    with use_db(str(session), WorkDB.Mode.open) as db:
        made = list(db.pending_work_items)
        items = [
            item
            for item in made
            if not _inside(item.mutations[0].start_pos, skip)
            and (within is None or _inside(item.mutations[0].start_pos, within))
        ]
        kept = random.Random(seed).sample(items, limit) if limit and len(items) > limit else items
        db.clear()
        db.add_work_items(kept)
    return len(made), len(items), len(kept)


def run(module: str, workdir: Path, options: argparse.Namespace) -> dict[str, object]:
    """One module: init, filter and sample, exec; prints the survivors and a summary line."""
    cfg = workdir / f"{module.replace('/', '_')}.toml"
    session = workdir / f"{module.replace('/', '_')}.sqlite"
    cfg.write_text(config(module, COVERING[module], options.timeout))
    env = {**os.environ, "VAR_DIR": str(workdir / "var"), "PYTHONPATH": str(workdir)}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    cosmic = [PYTHON, "-m", "cosmic_ray.cli"]
    subprocess.run([*cosmic, "init", str(cfg), str(session)], cwd=workdir, env=env, check=True)
    made, eligible, kept = select(session, workdir / module, module, options.limit, seed=options.seed)
    scope = f"sample of {kept} of {eligible}, seed {options.seed}" if kept < eligible else f"all {kept}"
    row: dict[str, object] = {"module": module, "made": made, "scope": scope, "judged": 0, "killed": 0}
    if options.count:
        print(f"{module}: {made} mutants made, {eligible} outside annotations (and ONLY_IN), {kept} to run")
        return row
    started = time.monotonic()
    subprocess.run([*cosmic, "exec", str(cfg), str(session)], cwd=workdir, env=env, check=True)
    killed, judged, survivors = killed_share(session, options.diffs)
    if options.keep:
        Path(options.keep).mkdir(parents=True, exist_ok=True)
        shutil.copy2(session, Path(options.keep) / session.name)
    for survivor in survivors:
        print(f"    survived: {survivor}")
    share = 100.0 * killed / judged if judged else 0.0
    row.update(judged=judged, killed=killed, share=f"{share:.1f}%")
    print(
        f"{module}: {killed}/{judged} killed ({share:.1f}%), {scope}, "
        f"{time.monotonic() - started:.0f} s{'' if share >= 90 else '  BELOW 90%'}",
        flush=True,
    )
    return row


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| Module | Mutants run | Killed | Share |", "|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| `{row['module']}` ({row['scope']}) | {row['judged']} | {row['killed']} | {row.get('share', '-')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="modules to run (default: every listed one)")
    parser.add_argument("--limit", type=int, default=None, help="a random sample of this many mutants each")
    parser.add_argument("--seed", type=int, default=29, help="the sample's seed")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds per mutant's test run (a hung mutant counts as killed)",
    )
    parser.add_argument("--count", action="store_true", help="count the mutants, run nothing")
    parser.add_argument("--diffs", action="store_true", help="print each survivor's diff")
    parser.add_argument("--keep", metavar="DIR", help="copy each module's cosmic-ray session here")
    options = parser.parse_args(argv)
    modules = options.only or list(COVERING)
    with tempfile.TemporaryDirectory(prefix="mcptax-mutants-") as tmp:
        workdir = Path(tmp)
        copy_tree(workdir)
        rows = [run(module, workdir, options) for module in modules]
    if not options.count:
        print(table(rows))
    return 0 if all(int(str(row["killed"])) >= 0.9 * int(str(row["judged"])) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
