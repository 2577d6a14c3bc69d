"""The wire formats, text 0.0.4 and OpenMetrics 1.0.

The byte scanner, the sample-line grammar, the reader that turns a payload into families and the
writer that turns families into bytes. Depends on ``model`` only; no I/O.
"""
