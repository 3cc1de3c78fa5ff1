"""Answer quality measured against gold labels: pure metric functions (`metrics`)."""
