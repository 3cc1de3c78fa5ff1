"""A fit's kept readouts (`tasks/jobs.py` `KeptReadouts`) after a process died mid-write."""

from __future__ import annotations

import json
from pathlib import Path

from openjev.tasks.jobs import KeptReadouts


def test_a_readout_kept_after_a_torn_last_line_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "fits" / "task.jsonl"
    path.parent.mkdir()
    whole = json.dumps({"key": "a", "readouts": [[0.5, 0.5]]})
    path.write_text(whole + "\n" + '{"key": "b", "readouts": [[0.2')  # the process died mid-write
    kept = KeptReadouts(path)
    assert dict(kept) == {"a": [[0.5, 0.5]]}  # the torn line is read again later
    kept["c"] = [[0.9, 0.1]]
    again = KeptReadouts(path)
    assert dict(again) == {"a": [[0.5, 0.5]], "c": [[0.9, 0.1]]}
    assert all(json.loads(line) for line in path.read_text().splitlines())
