"""The request stage: the wire contract (`schema`) and the checks that need no tokenizer (`validation`).

It owns what a Jev request and its answers look like on the wire and which bodies are refused before any
prompt is built (empty states, bad question ids, lone surrogates, features this deployment lacks), each
refusal an `errors.Issue` naming its field; `sizes` counts what a request brings to prepare; `assets`
checks image assets and finds their bytes, `images` makes each one safe for a backend. It imports only
the foundation modules at the top of the package (`errors`, `config`, `examples`); every later stage
imports it, never the reverse.
"""
