"""The `decisions-examples-dev` suite: decisions with described options asked zero-shot and with one
worked example per option (Jev's `{"what", "examples"}` criteria form), in contrastive pairs.

It owns the hand-written families and rubrics (`families`, `rubrics`), the generator (`gen`), asking a
server (`asking`) and the report (`report`). It imports the harness (`evals.harness`), never another
suite; `register` adds it to the harness registry. It has no offline variants.
"""

from __future__ import annotations

from typing import Any

from evals.harness import registry
from evals.worked_examples import asking, report


def no_variants(meta: dict[str, Any], records: Any, variant: str) -> list[dict[str, Any]]:
    raise ValueError(f"{asking.NAME} has no offline variants, not {variant!r}")


SPEC = registry.SuiteSpec(
    name=asking.NAME,
    load=asking.load_suite,
    run=asking.run_suite,
    write_report=report.write_report,
    variant_records=no_variants,
    variants=(),
)


def register() -> None:
    registry.register(SPEC)
