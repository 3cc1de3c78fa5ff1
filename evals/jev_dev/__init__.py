"""The `jev-dev` suite: generated Jev requests (states) with noul, choice and score questions, gold by rule.

It owns the generator and its templates (`gen`, `templates`, `domains`), the data and the requests
with their extra views (`dataset`), asking a server (`asking`, with `--types`), the report with its
coherence laws (`report`) and the offline label-bias variants (`variants`). It imports the harness
(`evals.harness`) and `openjev`, never another suite; `register` adds it to the harness registry.
"""

from __future__ import annotations

from evals.harness import registry
from evals.jev_dev import asking, report, variants

SPEC = registry.SuiteSpec(
    name="jev-dev",
    load=asking.load_suite,
    run=asking.run_jev_dev,
    write_report=report.write_jev_report,
    variant_records=variants.run_variant_records,
    variants=report.VARIANTS,
    add_arguments=asking.add_arguments,
)


def register() -> None:
    registry.register(SPEC)
