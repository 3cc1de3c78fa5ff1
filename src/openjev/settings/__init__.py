"""The groups of settings a stage reads on its own, each a class that `config.Settings` inherits, so
`config.py` (below every stage) imports nothing above it.
"""
