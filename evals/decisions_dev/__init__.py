"""The `decisions-dev` suite: decisions under written policies, routing, claims, sentiment, intent and triage,
in contrastive pairs, gold by rule.

It owns the generator and its families (`gen`, `families`, `tickets`), the data and the requests with
their extra views (`dataset`), asking a server (`asking`) and the report with its offline variants
(`variants`, `report`, `tables`), and the position run (`positions`, `position_variants`,
`position_report`; `run_report` picks a run's report). It imports the harness (`evals.harness`) and
`openjev`, never another suite.
"""

from __future__ import annotations

from evals.decisions_dev import asking, report, run_report, variants
from evals.harness import registry

SPEC = registry.SuiteSpec(
    name="decisions-dev",
    load=asking.load_suite,
    run=asking.run_decisions_dev,
    write_report=run_report.write_report,
    variant_records=report.variant_records,
    variants=variants.VARIANTS,
    add_arguments=asking.add_arguments,
)


def register() -> None:
    registry.register(SPEC)
