"""The MMLU family of suites: `mmlu-pro-matched`, `mmlu-pro-dev` and `mmlu`, one choice question per item.

It owns the suites' data and order (`suites`), asking them (`asking`, with `--shifts`), their report
(`report`) and their offline option-order variants (`variants`). It imports the harness
(`evals.harness`) and `openjev`, never another suite; `register` adds its suites to the harness registry.
"""

from __future__ import annotations

import functools

from evals.harness import registry
from evals.mmlu import asking, report, suites, variants

SPECS = tuple(
    registry.SuiteSpec(
        name=name,
        load=functools.partial(suites.load_suite, name),
        run=asking.run_suite,
        write_report=report.write_report,
        variant_records=variants.run_variant_records,
        variants=variants.VARIANTS,
        add_arguments=asking.add_arguments,
        tunable=name != "mmlu-pro-matched",
    )
    for name in suites.SUITES
)


def register() -> None:
    for spec in SPECS:
        registry.register(spec)
