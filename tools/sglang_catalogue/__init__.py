"""Static extraction of SGLang's Prometheus metric families from a released wheel or sdist.

Nothing here imports SGLang: each release's Python sources are read out of the downloaded
archive and parsed with :mod:`ast`. ``tools/extract_sglang_catalogue.py`` is the command line.
"""
