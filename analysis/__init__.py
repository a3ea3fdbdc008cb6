"""Offline analysis of eosim histories: load a JSON Lines history and check it for anomalies.

`eosim.analysis.history` parses the format described in docs/history-format.md;
`eosim.analysis.checker` reports the delivery anomalies named in the shared anomaly reference.
"""
