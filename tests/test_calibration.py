"""The calibration file: validated with a clear reason, looked up by question type and option count."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from openjev.calibration import FORMAT, CalibrationError, bucket_of, load_calibration, parse_calibration
from openjev.config import Settings


def test_buckets_cover_every_option_count():
    assert [bucket_of(n) for n in (2, 3, 4, 5, 10, 11, 255)] == ["2", "3-4", "3-4", "5-10", "5-10", "11-255", "11-255"]


def test_a_file_is_read_and_looked_up(tmp_path: Path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": FORMAT, "temperatures": {"choice": {"3-4": 1.5}}, "fitted": {"n": 3}}))
    calibration = load_calibration(path)
    assert calibration.source == str(path)
    assert calibration.temperature("choice", 4) == 1.5
    assert calibration.temperature("choice", 10) is None
    assert calibration.temperature("noul", 2) is None


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"temperatures": {}}, "format"),
        ({"format": FORMAT, "temperatures": {"box": {"2": 1.0}}}, "unknown question type 'box'"),
        ({"format": FORMAT, "temperatures": {"choice": {"4": 1.0}}}, "unknown bucket '4'"),
        ({"format": FORMAT, "temperatures": {"choice": {"3-4": 0}}}, "temperature choice/3-4"),
        ({"format": FORMAT, "temperatures": {"choice": {"3-4": True}}}, "temperature choice/3-4"),
        ({"format": FORMAT, "temperatures": []}, '"temperatures" must be an object'),
    ],
)
def test_a_bad_document_is_refused_with_its_reason(document, reason):
    with pytest.raises(CalibrationError, match=reason):
        parse_calibration(document, "x.json")


def test_a_bad_file_stops_the_settings_with_its_path(tmp_path: Path):
    missing = tmp_path / "missing.json"
    with pytest.raises(ValidationError, match=r"missing\.json cannot be read"):
        Settings(calibration_file=missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValidationError, match=r"broken\.json is not valid JSON"):
        Settings(calibration_file=broken)
