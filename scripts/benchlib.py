"""What every benchmark here shares: paired, alternating rounds and an honest summary.

Each round runs every subject once, in an order that alternates round by round, so drift in the
machine's load (another process, CPU frequency) lands on all subjects alike. Wall time and CPU time
(this process's, plus its finished children's) are kept per run; the summary gives the median and
the range of each, and every subject's ratio to the named floor, run by run.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Measured:
    """What a subject returns when it timed itself (work in a child process, timed there without
    the process's start-up): used instead of the outside measurement."""

    wall: float
    cpu: float


def cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def paired(subjects: dict[str, Callable[[], object]], rounds: int) -> dict[str, Runs]:
    """Run each subject once per round, the order reversed every other round."""
    names = list(subjects)
    runs = {name: Runs() for name in names}
    for index in range(rounds):
        order = names if index % 2 == 0 else list(reversed(names))
        for name in order:
            cpu, wall = cpu_now(), time.perf_counter()
            result = subjects[name]()
            if isinstance(result, Measured):
                runs[name].wall.append(result.wall)
                runs[name].cpu.append(result.cpu)
            else:
                runs[name].wall.append(time.perf_counter() - wall)
                runs[name].cpu.append(cpu_now() - cpu)
    return runs


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def ratios(runs: dict[str, Runs], subject: str, floor: str) -> tuple[float, float]:
    """Median of the per-round ratios subject/floor, wall and CPU."""
    wall = [s / f for s, f in zip(runs[subject].wall, runs[floor].wall, strict=True) if f > 0]
    cpu = [s / f for s, f in zip(runs[subject].cpu, runs[floor].cpu, strict=True) if f > 0]
    return statistics.median(wall), (statistics.median(cpu) if cpu else float("nan"))


def report(title: str, runs: dict[str, Runs], floor: str) -> None:
    load = os.getloadavg()
    print(f"\n{title}  (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} cores)")
    print(f"{'subject':<28} {'wall s median (range)':<28} {'cpu s median (range)':<28} vs {floor}")
    for name, data in runs.items():
        ratio = "" if name == floor else "wall {:.2f}x  cpu {:.2f}x".format(*ratios(runs, name, floor))
        print(f"{name:<28} {_spread(data.wall):<28} {_spread(data.cpu):<28} {ratio}")


def target(label: str, value: float, op: str, goal: float) -> bool:
    met = value >= goal if op == ">=" else value <= goal
    print(f"target: {label} {value:.2f} {op} {goal:.2f}: {'met' if met else 'NOT met'}")
    return met
