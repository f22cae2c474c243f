"""The test suite's set-up phase: everything the suite needs from a registry, installed once and
cached under var/, so the tests themselves never reach the network.

    .venv/bin/python scripts/test_setup.py            # what scripts/test.sh runs before the tests
    .venv/bin/python scripts/test_setup.py --check    # say what is missing, install nothing

- axe-core (npm) into var/axe, for the accessibility test;
- mitmproxy (PyPI) into its own virtualenv var/mitm-venv (it pins its own h11, so it cannot share
  ours), for the HAR end-to-end test;
- the live corpus servers (time from PyPI, memory and playwright from npm) under var/servers,
  through scripts/capture_servers.py.

Each step is skipped when its cache is already there. A step that fails (no npm, no network) is
reported and the run goes on: the tests that need it skip on a developer's machine and fail with
CI=true (tests.helpers.need), so CI cannot pass without them.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"  # not VAR_DIR: the caches are shared by both legs and by every run
AXE_DIR = VAR / "axe"
AXE_SCRIPT = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
AXE_VERSION = "4"
MITM_VENV = Path(os.environ.get("MITM_VENV") or VAR / "mitm-venv")
MITMDUMP = MITM_VENV / "bin" / "mitmdump"
MITMPROXY_REQUIREMENT = "mitmproxy>=11,<13"
LIVE_SERVERS = ("time", "memory", "playwright")


def install_axe() -> str | None:
    """axe-core's browser bundle under var/axe; None when done, else why not."""
    if AXE_SCRIPT.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    AXE_DIR.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(AXE_DIR), "--no-audit", "--no-fund", f"axe-core@{AXE_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return None if AXE_SCRIPT.exists() else f"npm install axe-core failed: {done.stderr[-1000:]}"


def python_for_mitmproxy() -> str:
    """A Python 3.12+ when the machine has one (current mitmproxy), else this one (mitmproxy 11)."""
    candidates = [shutil.which(f"python3.{minor}") for minor in (12, 13)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[23]*/bin/python3")))
    for candidate in filter(None, candidates):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            probe = subprocess.run([candidate, "--version"], capture_output=True, text=True, timeout=20)
            if probe.returncode == 0 and probe.stdout.startswith("Python 3.1"):
                return candidate
    return sys.executable


def install_mitmproxy() -> str | None:
    """mitmdump in its own virtualenv under var/; None when done, else why not."""
    if MITMDUMP.exists():
        return None
    try:
        subprocess.run(
            [python_for_mitmproxy(), "-m", "venv", str(MITM_VENV)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        done = subprocess.run(
            [str(MITM_VENV / "bin" / "pip"), "install", "-q", MITMPROXY_REQUIREMENT],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(MITM_VENV, ignore_errors=True)
        return f"cannot create a virtualenv for mitmproxy: {exc}"
    if done.returncode != 0 or not MITMDUMP.exists():
        shutil.rmtree(MITM_VENV, ignore_errors=True)
        return f"pip install mitmproxy failed: {done.stderr[-1000:]}"
    return None


def _capture_servers():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "scripts"))
    import capture_servers

    return capture_servers


def live_servers() -> list:  # type: ignore[type-arg]
    return [s for s in _capture_servers().CORPUS if s.name in LIVE_SERVERS]


def live_servers_missing() -> list[str]:
    """Names of the live servers whose pinned version is not installed under var/servers."""
    cs = _capture_servers()
    previous = os.environ.get("VAR_DIR")
    os.environ["VAR_DIR"] = str(VAR)  # cached beside the captures, whatever VAR_DIR a test run uses
    try:
        missing = []
        for server in live_servers():
            if server.registry == "npm":
                ok = cs._installed_npm_version(server) == server.version
            else:
                stamp = cs.pypi_venv(server) / ".installed"
                ok = stamp.exists() and stamp.read_text() == f"{server.package}=={server.version}"
            if not ok:
                missing.append(server.name)
        return missing
    finally:
        if previous is None:
            os.environ.pop("VAR_DIR", None)
        else:
            os.environ["VAR_DIR"] = previous


def install_live_servers() -> str | None:
    if not live_servers_missing():
        return None
    if shutil.which("npm") is None:
        return "npm is not installed"
    previous = os.environ.get("VAR_DIR")
    os.environ["VAR_DIR"] = str(VAR)
    try:
        _capture_servers().install(live_servers())
    except (OSError, subprocess.SubprocessError) as exc:
        return f"installing the live servers failed: {exc}"
    finally:
        if previous is None:
            os.environ.pop("VAR_DIR", None)
        else:
            os.environ["VAR_DIR"] = previous
    missing = live_servers_missing()
    return f"still missing after the install: {', '.join(missing)}" if missing else None


STEPS: dict[str, tuple[Callable[[], str | None], Callable[[], bool]]] = {
    "axe-core (var/axe)": (install_axe, AXE_SCRIPT.exists),
    "mitmproxy (var/mitm-venv)": (install_mitmproxy, MITMDUMP.exists),
    "live servers (var/servers)": (install_live_servers, lambda: not live_servers_missing()),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report what is missing; install nothing")
    options = parser.parse_args(argv)
    missing = 0
    for name, (install, present) in STEPS.items():
        problem = ("not installed" if not present() else None) if options.check else install()
        print(f"== {name}: {'ok' if problem is None else problem}")
        missing += problem is not None
    return 1 if options.check and missing else 0


if __name__ == "__main__":
    sys.exit(main())
