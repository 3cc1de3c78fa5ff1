"""Answer-quality harness for any Jev `/v1/systemone`: the shared harness and the suites that register with it.

`evals.harness` (run, report, compare, calibrate, metrics, the registry) imports no suite; each suite
package (`evals.mmlu`, `evals.jev_dev`) imports the harness and registers with it; the entry scripts
(`evals/run.py`, `report.py`, `compare.py`, `calibrate.py`) are the top: they register every suite
(`evals.catalogue`) and run the harness's command. Run them from the repository root
(`uv run evals/run.py ...`); see evals/README.md.
"""
