"""The server's paths and the constants its clients share with it.

The routes (`api/`) and the client commands (`openjev tasks|eval|classify`, `batch/`) read them from
here, so a client imports no server module (no web framework, no service) to know where to send.
"""

from __future__ import annotations

#: The SDKs' default model name; always accepted as an alias of the served model.
COMPAT_MODEL_ALIAS = "jev-latest"

SYSTEM_ONE_PATH = "/v1/systemone"
DECISIONS_PATH = "/v1/decisions"
OPENROUTER_PATH = "/api/alpha/decisions"
TASKS_PATH = "/v1/tasks"
FITS_PATH = "/v1/tasks/fits"
#: Tasks a page of `GET /v1/tasks` lists by default and at most.
TASKS_PAGE = 100
TASKS_MAX_PAGE = 1000
