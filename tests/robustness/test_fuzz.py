"""Schemathesis over openjev's own `/openapi.json`, openjev on the fake SGLang: no 5xx, and every
response conforms to the document (status listed, content type, body schema, headers)."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.robustness, pytest.mark.timeout(660)]  # room for one rerun (GENERATOR_FAULT)

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance,response_headers_conformance"
)
#: Per operation and phase; about 1,500 requests in all, 1-2 minutes on 2 cores.
MAX_EXAMPLES = 300
#: The routes of the other contracts, fuzzed in a run of their own so each run stays within minutes.
OTHER_CONTRACTS = ("--include-path-regex", "decisions$")
OTHER_CONTRACTS_EXCLUDED = ("--exclude-path-regex", "decisions$")
DECISION_EXAMPLES = 150


def statuses_in(report: Path) -> collections.Counter[int]:
    """HTTP statuses of every request schemathesis made, from its NDJSON event log."""
    counts: collections.Counter[int] = collections.Counter()
    for line in report.read_text().splitlines():
        event = json.loads(line)
        for _, recorder in event.get("ScenarioFinished", {}).get("recorder", {}).get("interactions", {}).items():
            if recorder.get("response"):
                counts[recorder["response"]["status_code"]] += 1
    return counts


#: A CPython 3.11 fault inside the fuzzer's own example generation: before 3.11.8 the `ast` parser kept its
#: recursion depth per interpreter, not per thread, so two of schemathesis's worker threads describing
#: hypothesis strategies at once can get this SystemError (CI's 3.11.7 got it twice in one run). The fuzzer
#: therefore runs one worker; should the fault still come, the run is made once more. Not a finding about
#: the server; any check's failure still fails.
GENERATOR_FAULT = "AST constructor recursion depth mismatch"


def fuzz(url: str, tmp_path: Path, figures, *operations: str, max_examples: int) -> collections.Counter[int]:
    """Schemathesis over the operations `operations` selects; the statuses it got, recorded as figures."""
    for attempt in range(2):
        report = tmp_path / f"schemathesis-{attempt}.ndjson"
        command = [
            str(Path(sys.executable).with_name("st")), "run", f"{url}/openapi.json", *operations,
            "--checks", CHECKS, "--max-examples", str(max_examples), "--seed", "8", "--workers", "1",
            "--request-timeout", "30", "--report", "ndjson", "--report-ndjson-path", str(report),
        ]  # fmt: skip
        # Run in the tmp dir: schemathesis keeps its example database in the working directory.
        run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        statuses = statuses_in(report)
        server_errors = sum(count for status, count in statuses.items() if status >= 500)
        if server_errors or run.returncode == 0 or GENERATOR_FAULT not in run.stdout:
            break
    figures(
        fuzzed_requests=sum(statuses.values()), server_errors=server_errors, statuses=dict(sorted(statuses.items())),
        runs=attempt + 1,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert server_errors == 0
    return statuses


def test_fuzzing_the_document_finds_no_5xx_and_no_nonconformance(openjev_on_fake, tmp_path, figures) -> None:
    statuses = fuzz(openjev_on_fake.url, tmp_path, figures, *OTHER_CONTRACTS_EXCLUDED, max_examples=MAX_EXAMPLES)
    assert sum(statuses.values()) > 500


def test_fuzzing_the_other_decision_routes_finds_no_5xx_and_no_nonconformance(
    openjev_on_fake, tmp_path, figures
) -> None:
    """`/v1/decisions` (OpenAI's envelope on every error) and `/api/alpha/decisions`."""
    statuses = fuzz(openjev_on_fake.url, tmp_path, figures, *OTHER_CONTRACTS, max_examples=DECISION_EXAMPLES)
    assert sum(statuses.values()) > 200 and statuses[200] > 0 and statuses[400] > 0
