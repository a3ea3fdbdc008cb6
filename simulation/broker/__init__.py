"""Broker-side model: partition logs, producer state, producer ids and request handling."""
