"""Helpers the tests import: paths, oracles, fake upstreams, payloads and strategies."""
