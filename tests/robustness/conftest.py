"""Shared by the robustness suites: a figures record (printed, and written as JSON into the test's tmp
dir) and the resident memory of a server process."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Record = Callable[..., None]


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@pytest.fixture
def figures(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Record]:
    """`figures(name=value, ...)` records the suite's numbers; at the end of the test they are printed
    (seen with `-s`) and written to `<tmp_path>/figures.json`."""
    recorded: dict[str, Any] = {}

    def record(**values: Any) -> None:
        recorded.update(values)

    yield record
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(recorded, indent=2))
    print(f"\n{request.node.name}: {json.dumps(recorded)}\n(figures written to {path})")
