"""CI runs every test: there a skip is a failure.

- With `CI` set (`.ci/run` sets it), every skipped test fails, and so does a module skipped at
  collection (`pytest.importorskip` at its top: `tests/test_modal_app.py` without the deploy group),
  whatever the reason: a missing package, environment or browser must not pass silently.
- With `OPENJEV_REQUIRE_EMBEDDED` or `OPENJEV_REQUIRE_SGLANG_LIVE` set, a skipped test of that marker
  fails (for a local run that needs one kind of test, not all).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

#: Markers whose tests must run, not skip, when the variable is set.
REQUIRED_MARKERS = {"embedded": "OPENJEV_REQUIRE_EMBEDDED", "sglang_live": "OPENJEV_REQUIRE_SGLANG_LIVE"}
#: Set: no skip at all.
EVERY_TEST = "CI"
GUARD_VARIABLES = (EVERY_TEST, *REQUIRED_MARKERS.values())


def _set(variable: str) -> bool:
    return os.environ.get(variable, "").lower() not in ("", "0", "false")


def _why_it_must_run(item: pytest.Item) -> str | None:
    if _set(EVERY_TEST):
        return f"{EVERY_TEST} is set"
    for marker, variable in REQUIRED_MARKERS.items():
        if _set(variable) and item.get_closest_marker(marker):
            return f"{marker} test, and {variable} is set"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A skipped test that must run is a failure."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    reason = _why_it_must_run(item) if report.skipped else None
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"skipped, but it must run ({reason}): {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped at collection is an error when every test must run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and _set(EVERY_TEST):
        report.outcome = "failed"
        report.longrepr = f"skipped at collection, but {EVERY_TEST} is set: {report.longrepr}"
