"""Rules exported for Prometheus itself.

Recording rules and relabel configs that do what a metricbridge rules file does, for teams that
would rather not run the sidecar.
"""
