"""The shape of the code, checked: module and function size, a Django-free core, no import cycles between
sub-packages nor between modules, every test asserting something, and the layout in
docs/architecture.md matching the tree."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mcptax", "dashboard", "ingest", "config")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# Functions still over the cap, each to be split where a name helps; the list only shrinks.
LONG_FUNCTIONS_LEFT: set[str] = set()
WEB_FRAMEWORKS = ("django", "celery", "kombu", "ninja", "django_htmx", "template_partials")


def python_files(*tops: str) -> list[Path]:
    files: list[Path] = []
    for top in tops:
        files += [p for p in (ROOT / top).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Project modules `path` imports at run time (lazy imports included, type-only ones not)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if candidate in known else node.module)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def unit_of(module: str) -> str:
    """The sub-package a module belongs to (`dashboard.servers`, `mcptax.formats`), or the module
    itself when it sits at an app's top level (`dashboard.models`, `mcptax.tokens`)."""
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else module


def test_no_module_is_over_500_lines():
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in python_files(*PACKAGES, "tests", "scripts", "examples")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}, f"split these modules along their concerns: {too_long}"


def test_no_function_is_over_80_lines():
    too_long = {}
    for path in python_files(*PACKAGES):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long[f"{path.relative_to(ROOT)}::{node.name}"] = length
    assert set(too_long) - LONG_FUNCTIONS_LEFT == set(), f"split these functions: {too_long}"
    assert LONG_FUNCTIONS_LEFT - set(too_long) == set(), "split already: drop them from the list"


def test_core_package_imports_no_web_framework_statically():
    offenders = []
    for path in python_files("mcptax"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            names = [
                n for n in names if n.split(".")[0] in (*WEB_FRAMEWORKS, "dashboard", "ingest", "config")
            ]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names]
    assert offenders == []


def test_importing_every_core_module_loads_no_django():
    modules = [module_name(p) for p in python_files("mcptax") if p.name != "__main__.py"]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {WEB_FRAMEWORKS!r})\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"


def test_sub_packages_import_each_other_without_cycles():
    files = python_files(*PACKAGES)
    known = {module_name(p) for p in files}
    graph: dict[str, set[str]] = defaultdict(set)
    evidence: dict[tuple[str, str], str] = {}
    for path in files:
        source = module_name(path)
        for target in imported_modules(path, known):
            a, b = unit_of(source), unit_of(target)
            if a != b:
                graph[a].add(b)
                evidence.setdefault((a, b), f"{source} -> {target}")
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        steps = [evidence.get((cycle[i + 1], cycle[i]), "?") for i in range(len(cycle) - 1)]
        pytest.fail(f"import cycle between sub-packages: {' <- '.join(cycle)}\n" + "\n".join(steps))


def test_no_module_imports_itself_back():
    """No runtime import cycle between modules either (lazy imports included, type-only ones not):
    two modules that need each other share a third one instead."""
    files = python_files(*PACKAGES)
    known = {module_name(p) for p in files}
    graph = {module_name(p): imported_modules(p, known) - {module_name(p)} for p in files}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"import cycle between modules: {' <- '.join(exc.args[1])}")


# -- every test asserts --------------------------------------------------------------------------

ASSERTING_CALLS = {"raises", "warns", "fail", "expect", "approx"}


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _called_names(fn: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


def _asserts_directly(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(fn)) or bool(_called_names(fn) & ASSERTING_CALLS)


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of `fn`'s own body, leaving out nested functions, lambdas and classes."""
    found, stack = [], list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _returns_before_asserting(fn: ast.AST, asserting: set[str]) -> bool:
    """A `return` at or before the first line that checks something: some runs check nothing."""
    nodes = _own_nodes(fn)
    checks = [
        n.lineno
        for n in nodes
        if isinstance(n, ast.Assert)
        or isinstance(n, ast.Call)
        and _called_names(n) & (ASSERTING_CALLS | asserting)
    ]
    first = min(checks, default=None)
    return any(isinstance(n, ast.Return) and (first is None or n.lineno <= first) for n in nodes)


def test_every_test_function_asserts():
    """A test passes only by checking something: an `assert`, `pytest.raises`/`fail`, Playwright's
    `expect`, or a call to a helper (in its module, a conftest or tests/helpers.py) that does."""
    modules = {p: ast.parse(p.read_text()) for p in (ROOT / "tests").rglob("*.py")}
    shared = {
        name: fn
        for p, tree in modules.items()
        if p.name in ("conftest.py", "helpers.py", "factories.py")
        for name, fn in _functions(tree).items()
    }
    silent = []
    for path, tree in modules.items():
        local = {**shared, **_functions(tree)}
        asserting = {name for name, fn in local.items() if _asserts_directly(fn)}
        changed = True
        while changed:  # helpers that call asserting helpers assert too
            changed = False
            for name, fn in local.items():
                if name not in asserting and _called_names(fn) & asserting:
                    asserting.add(name)
                    changed = True
        for name, fn in _functions(tree).items():
            if name.startswith("test_") and name not in asserting:
                silent.append(f"{path.relative_to(ROOT)}::{name}")
            elif name.startswith("test_") and _returns_before_asserting(fn, asserting):
                silent.append(f"{path.relative_to(ROOT)}::{name} (can return before its first check)")
    assert silent == [], f"these tests assert nothing: {silent}"


# -- the layout section of docs/architecture.md -------------------------------------------------------


def _layout_section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    match = re.search(r"^## Layout\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "docs/architecture.md has no '## Layout' section"
    return match.group(1)


def test_readme_layout_names_only_paths_that_exist():
    paths = re.findall(r"`([\w.-][\w./-]*/|[\w./-]+\.py)`", _layout_section())
    assert paths, "the layout section names no paths"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert missing == [], f"the layout names paths that do not exist: {missing}"


def test_readme_layout_names_every_sub_package():
    section = _layout_section()
    packages = sorted(
        str(init.parent.relative_to(ROOT)) + "/"
        for top in ("mcptax", "dashboard", "ingest")
        for init in (ROOT / top).glob("*/__init__.py")
        if init.parent.name not in ("migrations", "management", "templatetags")
    )
    unnamed = [p for p in packages if f"`{p}`" not in section]
    assert unnamed == [], f"the layout does not describe: {unnamed}"


# -- the second leg's selection ---------------------------------------------------------------------


def _collected(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_services_leg_keeps_every_test_the_database_or_services_can_change():
    """The PostgreSQL + Redis leg drops only tests that touch neither the database nor a service."""
    files = ["tests/mcptax/test_tokens.py", "tests/dashboard/servers/test_leases.py"]
    everything = _collected(*files)
    kept = _collected("--services-leg", *files)
    dropped = everything - kept
    # A token test touches no database; every lease test claims rows.
    assert dropped and all(t.startswith("tests/mcptax/test_tokens.py::") for t in dropped)
    assert {t for t in everything if t.startswith("tests/dashboard/servers/")} <= kept
    services_tests = _collected("-m", "services", "tests/dashboard/system/test_heartbeat.py")
    assert services_tests and services_tests <= _collected(
        "--services-leg", "tests/dashboard/system/test_heartbeat.py"
    )


def test_template_comments_close_on_their_own_line():
    """Django's `{# #}` comment is one line only: an unclosed one is printed on the page as text
    (use `{% comment %}` for more)."""
    unclosed = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "templates").rglob("*.html"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.count("{#") > line.count("#}")
    ]
    assert unclosed == [], f"these {{# comments run past their line: {unclosed}"
