"""A fit's kept readouts (`tasks/jobs.py` `KeptReadouts`): after a process died mid-write, and kept under
other answer settings than the server's now."""

from __future__ import annotations

import json
from pathlib import Path

from openjev.tasks.jobs import KeptReadouts

SETTINGS = {"answer_cue": "plain", "temperature": 1.0, "option_shifts": 1}


def test_a_readout_kept_after_a_torn_last_line_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "fits" / "task.jsonl"
    path.parent.mkdir()
    header = json.dumps({"answer_settings": SETTINGS})
    whole = json.dumps({"key": "a", "readouts": [[0.5, 0.5]]})
    path.write_text(header + "\n" + whole + "\n" + '{"key": "b", "readouts": [[0.2')  # the process died mid-write
    kept = KeptReadouts(path, SETTINGS)
    assert dict(kept) == {"a": [[0.5, 0.5]]}  # the torn line is read again later
    kept["c"] = [[0.9, 0.1]]
    again = KeptReadouts(path, SETTINGS)
    assert dict(again) == {"a": [[0.5, 0.5]], "c": [[0.9, 0.1]]}
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_readouts_kept_under_other_answer_settings_are_never_reused(tmp_path: Path) -> None:
    path = tmp_path / "fits" / "task.jsonl"
    kept = KeptReadouts(path, SETTINGS)
    kept["a"] = [[0.5, 0.5]]
    kept["b"] = [[0.2, 0.8]]
    assert dict(KeptReadouts(path, SETTINGS)) == {"a": [[0.5, 0.5]], "b": [[0.2, 0.8]]}
    other = KeptReadouts(path, {**SETTINGS, "temperature": 0.5})
    assert dict(other) == {} and other.discarded == 2 and not path.exists()
    other["a"] = [[0.7, 0.3]]
    assert dict(KeptReadouts(path, {**SETTINGS, "temperature": 0.5})) == {"a": [[0.7, 0.3]]}
    assert dict(KeptReadouts(path, SETTINGS)) == {}  # and back: the new ones are not the old settings' either


def test_a_file_that_names_no_settings_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "task.jsonl"
    path.write_text(json.dumps({"key": "a", "readouts": [[0.5, 0.5]]}) + "\n")  # a torn or missing first line
    kept = KeptReadouts(path, SETTINGS)
    assert dict(kept) == {} and kept.discarded == 0 and not path.exists()
