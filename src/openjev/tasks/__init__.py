"""Tasks: recurring questions learned from labelled examples.

`schema` (what `POST /v1/tasks` takes, and how a label is read), `settings` (the OPENJEV_TASK_*
settings, inherited by `config.Settings`), `calibration` (per-label bias and temperature by
likelihood, folds, held-out scores), `examples` (a task question with worked examples in its
criteria), `fitting` (a task fitted through the request path), `document` (a task's file format,
read within bounds), `store` (tasks as files, bounded and indexed), `stage` (a task applied by the
engine: its question rewritten before prompting, its answer calibrated after readout) and `client`
(what `openjev tasks fit` prints).
"""
