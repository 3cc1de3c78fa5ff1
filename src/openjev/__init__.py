"""openjev: a self-hosted, Jev-compatible System One API answered by prefill-only first-token readout."""

__version__ = "0.1.0"
