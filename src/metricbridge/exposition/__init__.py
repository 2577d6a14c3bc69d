"""The wire formats, text 0.0.4 and OpenMetrics 1.0.

The byte scanner, the sample-line grammar, the reader that turns a payload into families (its
fast path in ``reader``, whose docstring holds the fast path's invariant, its exact path in
``family_builder``) and the writer that turns families into bytes. Depends on ``model`` only;
no I/O, and no state between calls but the ``caches.CodecCaches`` a caller passes in.
"""
