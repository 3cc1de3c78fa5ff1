"""The HTTP face of openjev: routes, errors on the wire, middleware, bodies."""

from openjev.api.app import create_app

__all__ = ["create_app"]
