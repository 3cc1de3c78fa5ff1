"""The harness's commands look suites up by name: register every suite, as the entry scripts do."""

from __future__ import annotations

from evals import catalogue

catalogue.register_all()
