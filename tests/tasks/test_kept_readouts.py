"""A fit's kept readouts (`tasks/jobs.py` `KeptReadouts`): after a process died mid-write, kept under
other answer settings than the server's now, and kept before a setting was added."""

from __future__ import annotations

import json
from pathlib import Path

from openjev.answering.answer_settings import ADDED_SETTINGS, answer_settings
from openjev.config import Settings
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


def test_readouts_kept_before_a_setting_was_added_are_reused_where_it_keeps_its_former_value(tmp_path: Path) -> None:
    now = answer_settings(Settings())
    before = {name: value for name, value in now.items() if name not in ADDED_SETTINGS}
    assert before != now  # the stamp of a server from before the added settings
    path = tmp_path / "task.jsonl"
    KeptReadouts(path, before)["a"] = [[0.5, 0.5]]
    assert dict(KeptReadouts(path, now)) == {"a": [[0.5, 0.5]]}
    added = {name: value for name, value in now.items() if name in ADDED_SETTINGS}
    assert added == ADDED_SETTINGS  # each added setting's default is still what servers before it did
    changed = KeptReadouts(path, {**now, "option_order": "canonical"})
    assert dict(changed) == {} and changed.discarded == 1
