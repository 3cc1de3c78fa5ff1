"""The support-ticket request: the one example used by the docs, `openjev smoke`, the README and the tests."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def support_ticket() -> dict[str, Any]:
    """A fresh copy of the example request (all three question types about a support chat)."""
    data: dict[str, Any] = json.loads(resources.files(__name__).joinpath("support_ticket.json").read_text())
    return data
