"""What a task adds: a returns-policy choice fitted on 1, 5 and 20 labelled examples per label, scored on
held-out contrastive pairs (`data.py` writes them by rule; `measure.py` runs them against a server)."""
