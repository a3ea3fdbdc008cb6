"""Transaction coordinator model (in progress: see the transactions issue)."""
