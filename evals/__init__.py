"""Answer-quality harness for any Jev `/v1/systemone`: suites, metrics, runs, reports and comparisons.

Run its scripts from the repository root (`uv run evals/run.py ...`); see evals/README.md.
"""
