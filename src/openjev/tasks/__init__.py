"""Tasks: recurring questions learned from labelled examples.

`schema` (what `POST /v1/tasks` takes, and how a label is read), `settings` (the OPENJEV_TASK_*
settings, inherited by `config.Settings`), `calibration` (per-label bias and temperature by
likelihood, folds, held-out scores), `examples` (a task question with worked examples in its
criteria), `fitting` (a task fitted through the request path), `store` (tasks as files, and their use
by requests) and `client` (what `openjev tasks fit` prints).
"""
