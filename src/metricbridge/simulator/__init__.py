"""The built-in SGLang stand-in used by ``metricbridge demo``, the benchmarks and the tests.

An LLM server and an EPD encoder shaped like SGLang 0.5.23's output. Self-contained: imports no
other room.
"""
