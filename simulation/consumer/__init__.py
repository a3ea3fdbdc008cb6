"""Consumer-side model (in progress: see the transactions issue)."""
