"""From engine families to contract families.

Rules compiled for the hot path, the per-family operations, naming, synthesis (derive, warm-zero,
idle), the one pipeline (read, merge, translate, write) and the contract report. Pure: depends on
``model``, ``config`` and ``exposition``, and does no I/O.
"""
