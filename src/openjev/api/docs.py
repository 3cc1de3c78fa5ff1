"""The interactive API reference served at `/` (Scalar, reading `/openapi.json`)."""

REFERENCE_PAGE = """<!doctype html>
<html>
  <head>
    <title>openjev API reference</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" data-url="/openapi.json"></script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
  </body>
</html>
"""
