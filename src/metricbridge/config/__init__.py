"""Rules files, read and checked.

YAML is read into nodes that keep line marks, then into the frozen ``Config`` shaped like the
YAML; the checks refuse a broken file with every issue at once. Depends on ``model`` only; what
the hot path reads is compiled from a ``Config`` in ``translation``.
"""
