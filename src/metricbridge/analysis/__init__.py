"""Offline questions about what the bridge serves.

PromQL and Grafana reading, the served catalog, ``check`` findings and the engine-upgrade diff.
Depends on ``translation`` and below, never on the service.
"""
