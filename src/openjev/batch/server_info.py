"""What a run's report says about the server that answered it, as the server itself reports it.

`GET /health` gives the served model and openjev's version, `GET /v1/limits` the answer settings
(`answer_settings`). A Jev server that is not openjev may serve neither in that shape: what could not
be read is None and `unread` names the endpoint and why, so the report says so instead of guessing.
"""

from __future__ import annotations

from typing import Any

import httpx

from openjev.batch.client import bearer

FACTS_TIMEOUT_S = 30.0


def _get(client: httpx.Client, path: str, unread: dict[str, str]) -> dict[str, Any]:
    try:
        response = client.get(path)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as error:
        unread[path] = repr(error)
        return {}
    if not isinstance(body, dict):
        unread[path] = f"HTTP {response.status_code}: {response.text[:200]}"
        return {}
    return body


def server_facts(url: str, api_key: str | None) -> dict[str, Any]:
    """{server_url, served_model, openjev_version, answer_settings, unread} of the server at `url`."""
    unread: dict[str, str] = {}
    with httpx.Client(base_url=url.rstrip("/"), headers=bearer(api_key), timeout=FACTS_TIMEOUT_S) as client:
        health = _get(client, "/health", unread)
        limits = _get(client, "/v1/limits", unread)
    return {
        "server_url": url,
        "served_model": health.get("model"),
        "openjev_version": health.get("version"),
        "answer_settings": limits.get("answer_settings"),
        "unread": unread,
    }
