"""Schemathesis over openjev's own `/openapi.json`, openjev on the fake SGLang: no 5xx, and every
response conforms to the document (status listed, content type, body schema, headers)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(240)]

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance,response_headers_conformance"
)
#: Per operation and phase; about 1,500 requests in all, 1-2 minutes on 2 cores.
MAX_EXAMPLES = 300


def statuses_in(report: Path) -> collections.Counter[int]:
    """HTTP statuses of every request schemathesis made, from its NDJSON event log."""
    counts: collections.Counter[int] = collections.Counter()
    for line in report.read_text().splitlines():
        event = json.loads(line)
        for _, recorder in event.get("ScenarioFinished", {}).get("recorder", {}).get("interactions", {}).items():
            if recorder.get("response"):
                counts[recorder["response"]["status_code"]] += 1
    return counts


def test_fuzzing_the_document_finds_no_5xx_and_no_nonconformance(openjev_on_fake, tmp_path, figures) -> None:
    report = tmp_path / "schemathesis.ndjson"
    command = [
        str(Path(sys.executable).with_name("st")), "run", f"{openjev_on_fake.url}/openapi.json",
        "--checks", CHECKS, "--max-examples", str(MAX_EXAMPLES), "--seed", "8", "--workers", "2",
        "--request-timeout", "30", "--report", "ndjson", "--report-ndjson-path", str(report),
    ]  # fmt: skip
    # Run in the tmp dir: schemathesis keeps its example database in the working directory.
    run = subprocess.run(command, capture_output=True, text=True, timeout=220, cwd=tmp_path)
    statuses = statuses_in(report)
    server_errors = sum(count for status, count in statuses.items() if status >= 500)
    figures(
        fuzzed_requests=sum(statuses.values()), server_errors=server_errors, statuses=dict(sorted(statuses.items()))
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert server_errors == 0 and sum(statuses.values()) > 500
