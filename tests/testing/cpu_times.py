"""Per-test CPU time, for ``pytest --cpu-times FILE`` (tests/conftest.py): where a run's CPU goes, which
``--durations`` (wall time) does not tell on a shared machine.

Each test's CPU is its own process's (user + system, ``time.process_time``) plus that of the child processes it
started and waited for (``RUSAGE_CHILDREN``: ``ensemble-env`` commands, lessons, fuzz workers). A fuzz worker kept
for the next suite (tests/fuzzing.py) is counted where it is ended. The table sums the tests by file.

>>> table = CpuTimes()
>>> table.add("test_a.py::test_x", 1.0, 2.0); table.add("test_a.py::test_y", 0.5, 0.0)
>>> table.add("test_b.py::test_z", 0.25, 0.0)
>>> print(table.summary(top=2))
CPU per test (own + children), 3 tests: 3.8 s (1.8 own, 2.0 children)
  3.0 s  test_a.py::test_x
  0.5 s  test_a.py::test_y
by file:
  3.5 s  test_a.py
  0.2 s  test_b.py
"""

from __future__ import annotations

import json
import resource
from collections import Counter
from pathlib import Path

from ensemble_env.files import write_text


def children_seconds() -> float:
    """User + system CPU seconds of this process's finished and waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuTimes:
    """Each test's own and children's CPU seconds, by node id."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[float, float]] = {}

    def add(self, nodeid: str, own: float, children: float) -> None:
        self.rows[nodeid] = (own, children)

    def summary(self, top: int = 30) -> str:
        own = sum(row[0] for row in self.rows.values())
        children = sum(row[1] for row in self.rows.values())
        lines = [
            f"CPU per test (own + children), {len(self.rows)} tests: {own + children:.1f} s "
            f"({own:.1f} own, {children:.1f} children)"
        ]
        ranked = sorted(self.rows.items(), key=lambda item: -sum(item[1]))
        lines += [f"  {sum(row):.1f} s  {nodeid}" for nodeid, row in ranked[:top]]
        files: Counter[str] = Counter()
        for nodeid, row in self.rows.items():
            files[nodeid.split("::", 1)[0]] += sum(row)
        lines.append("by file:")
        lines += [f"  {seconds:.1f} s  {name}" for name, seconds in files.most_common(top)]
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        """The rows as JSON ``{nodeid: [own, children]}`` (the project's atomic writer)."""
        write_text(path, json.dumps(self.rows, indent=1))
