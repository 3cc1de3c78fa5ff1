"""`uv run evals/calibrate.py ...`: registers every suite (catalogue.py), then runs evals/harness/calibrate.py.

The command's contract is evals/harness/calibrate.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in {None, ""}:  # run as a script: make the `evals` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals import catalogue
from evals.harness import calibrate

if __name__ == "__main__":
    catalogue.register_all()
    sys.exit(calibrate.main())
