"""Offline analysis of eosim histories: load a JSON Lines history and check it for anomalies.

`analysis.history` parses the format described in docs/history-format.md; `analysis.checker`
reports the delivery anomalies named in the shared anomaly reference.
"""
