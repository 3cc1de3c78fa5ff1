"""The suites the harness knows: each suite package registers itself here, the harness looks them up by name.

Contract: a `SuiteSpec` names a suite, its loader (the `Suite` it asks), its runner (asks a server
and writes the report: `evals/run.py SUITE ...`), its report writer (`evals/report.py DIR`, chosen by
run.json's `suite`), its offline variants (`DIR@VARIANT` in `evals/compare.py` and
`evals/calibrate.py --variant`) and the command-line options it adds to `evals/run.py`. Registering
the same spec again is a no-op; another spec under a taken name is refused. The entry scripts
register every suite (evals/catalogue.py) before they parse their arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.harness.data import Suite

Records = Sequence[dict[str, Any]]


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    load: Callable[[], Suite]
    #: `run(args, suite)`: ask the loaded suite, write the report; the exit status of evals/run.py.
    run: Callable[[argparse.Namespace, Suite], int]
    write_report: Callable[[Path], dict[str, Any]]
    #: `variant_records(run_json, records, variant)`: every record of the run as the variant answers it
    #: (the run's answer settings say what the server applied itself); ValueError for one it cannot give.
    variant_records: Callable[[dict[str, Any], Records, str], list[dict[str, Any]]]
    variants: tuple[str, ...]
    #: Adds the suite's own options to `evals/run.py` (shared by a family of suites: added once).
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    #: False for a suite nothing may be fitted or tuned on (its figures stay comparable with published ones).
    tunable: bool = True


SUITES: dict[str, SuiteSpec] = {}


def register(spec: SuiteSpec) -> None:
    if SUITES.get(spec.name, spec) != spec:
        raise ValueError(f"another suite is registered as {spec.name!r}")
    SUITES[spec.name] = spec


def get(name: str) -> SuiteSpec:
    """The registered suite `name`; ValueError naming the known ones otherwise."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; choose from {', '.join(SUITES) or 'none registered'}")
    return SUITES[name]


def names() -> tuple[str, ...]:
    return tuple(SUITES)
