"""Backends answer one question: the log-probabilities of some label tokens after a prompt."""
