"""UTF-8 names: read with their spelling kept, written as each ``escaping`` wants them."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from helpers.paths import FIXTURES
from helpers.promtool import promtool_check_metrics
from metricbridge.exposition.reader import read_exposition
from metricbridge.exposition.writer import write_exposition
from metricbridge.model.family import Family, Format
from metricbridge.model.names import Escaping, escape_name, legacy_name

# client_golang's TestEscapeName scenarios (prometheus/common model/metric_test.go): input,
# underscores, dots, values.
GOLANG_SCENARIOS = [
    ("mysystem.prod.west.cpu.load", "mysystem_prod_west_cpu_load",
     "mysystem_dot_prod_dot_west_dot_cpu_dot_load", "U__mysystem_2e_prod_2e_west_2e_cpu_2e_load"),
    ("mysystem.prod.west.cpu.load_total", "mysystem_prod_west_cpu_load_total",
     "mysystem_dot_prod_dot_west_dot_cpu_dot_load__total",
     "U__mysystem_2e_prod_2e_west_2e_cpu_2e_load__total"),
    ("http.status:sum", "http_status:sum", "http_dot_status:sum", "U__http_2e_status:sum"),
    ("label with 😱", "label_with__", "label__with____", "U__label_20_with_20__1f631_"),
    ("花火", "__", "____", "U___82b1__706b_"),
    ("label with \u0100", "label_with__", "label__with____", "U__label_20_with_20__100_"),
    ("1st", "_st", "__st", "U___31_st"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "underscores", "dots", "values"), GOLANG_SCENARIOS)
def test_escaping_is_client_golangs(name: str, underscores: str, dots: str, values: str) -> None:
    assert escape_name(name, Escaping.UNDERSCORES) == underscores == legacy_name(name)
    assert escape_name(name, Escaping.DOTS) == dots
    assert escape_name(name, Escaping.VALUES) == values
    assert escape_name(name, Escaping.ALLOW_UTF8) == name


@pytest.mark.parametrize("scheme", list(Escaping))
def test_a_legacy_name_is_never_escaped(scheme: Escaping) -> None:
    """client_golang's EscapeMetricFamily escapes only names that need it, under dots too.

    (Its EscapeName alone would write ``no:escaping__required`` under dots.)
    """
    assert escape_name("sglang:cached_tokens_total", scheme) == "sglang:cached_tokens_total"
    assert escape_name("no_escaping_required", scheme, label=True) == "no_escaping_required"


@pytest.mark.parametrize("scheme", [Escaping.UNDERSCORES, Escaping.DOTS, Escaping.VALUES])
def test_an_escaped_label_name_is_a_legal_label_name(scheme: Escaping) -> None:
    """A colon is legal in a metric name only: every scheme that maps names maps it away."""
    escaped = escape_name("a:b.c", scheme, label=True)
    assert ":" not in escaped
    assert escaped[0].isalpha() or escaped[0] == "_"


PAYLOAD = (
    b'# HELP "my.gauge" A gauge.\n# TYPE "my.gauge" gauge\n{"my.gauge","lab.el"="b",a="1"} 1\n'
    b'# HELP "my.count" A counter.\n# TYPE "my.count" counter\n'
    b'{"my.count_total","lab.el"="b"} 2\n{"my.count_created","lab.el"="b"} 1.5e9\n'
    b'# TYPE "h.x" histogram\n{"h.x_bucket",le="1.0"} 1\n{"h.x_bucket",le="+Inf"} 2\n'
    b'{"h.x_count"} 2\n{"h.x_sum"} 3\n'
    b'# TYPE plain gauge\nplain{"odd:label"="v"} 4\n'
    b"# EOF\n"
)

SAMPLES_AS_READ = {
    ("my.gauge", (("a", "1"), ("lab.el", "b"))): 1.0,
    ("my.count_total", (("lab.el", "b"),)): 2.0,
    ("my.count_created", (("lab.el", "b"),)): 1.5e9,
    ("h.x_bucket", (("le", "1.0"),)): 1.0,
    ("h.x_bucket", (("le", "+Inf"),)): 2.0,
    ("h.x_count", ()): 2.0,
    ("h.x_sum", ()): 3.0,
    ("plain", (("odd:label", "v"),)): 4.0,
}


def _samples(body: bytes, fmt: Format) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    parse = parse_om if fmt is Format.OPENMETRICS else parse_text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parse(body.decode())
        for sample in family.samples
    }


@pytest.mark.parametrize("fmt", list(Format))
def test_allow_utf8_serves_the_names_as_they_came(fmt: Format) -> None:
    """Quoted where the grammar needs it; every sample, name and label as the engine spelled it."""
    exposition = read_exposition(PAYLOAD, Format.OPENMETRICS)
    assert not exposition.problems
    body = write_exposition(exposition.families, fmt, escaping=Escaping.ALLOW_UTF8)
    assert _samples(body, fmt) == SAMPLES_AS_READ
    assert b'{"my.gauge","lab.el"="b",a="1"} 1\n' in body
    assert b'plain{"odd:label"="v"} 4\n' in body  # a legal metric name stays before the braces
    header = b'# TYPE "my.count" counter\n' if fmt is Format.OPENMETRICS else b'"my.count_total"'
    assert header in body


@pytest.mark.parametrize("fmt", list(Format))
def test_underscores_serves_what_it_always_did(fmt: Format) -> None:
    """The default render, for Prometheus 2 and any scraper that names no escaping."""
    families = read_exposition(PAYLOAD, Format.OPENMETRICS).families
    body = write_exposition(families, fmt)
    assert body == write_exposition(families, fmt, escaping=Escaping.UNDERSCORES)
    assert b'my_gauge{lab_el="b",a="1"} 1\n' in body
    assert b'plain{odd_label="v"} 4\n' in body
    if fmt is Format.TEXT:
        promtool_check_metrics(body)
    names = {name for name, _ in _samples(body, fmt)}
    assert "h_x_bucket" in names
    assert "my_count_total" in names


@pytest.mark.parametrize("scheme", [Escaping.DOTS, Escaping.VALUES])
@pytest.mark.parametrize("fmt", list(Format))
def test_dots_and_values_escape_each_name_their_way(fmt: Format, scheme: Escaping) -> None:
    """Legacy names out, valid for promtool; each one what client_golang would write."""
    families = read_exposition(PAYLOAD, Format.OPENMETRICS).families
    body = write_exposition(families, fmt, escaping=scheme)
    if fmt is Format.TEXT:
        promtool_check_metrics(body)
    served = _samples(body, fmt)
    expected = {
        (
            escape_name(name, scheme),
            tuple(sorted((escape_name(k, scheme, label=True), v) for k, v in labels)),
        ): value
        for (name, labels), value in SAMPLES_AS_READ.items()
    }
    assert served == expected


def test_a_renamed_family_serves_the_bridges_names() -> None:
    """The UTF-8 names belong to the name the family was read with, not to a rule's new one."""
    (family,) = read_exposition(b'{"my.gauge","lab.el"="b"} 1\n', Format.TEXT).families
    assert isinstance(family, Family)
    meta = dataclasses.replace(family.meta, name="renamed")
    samples = tuple(dataclasses.replace(s, name="renamed") for s in family.samples)
    body = write_exposition([Family(meta, samples)], Format.TEXT, escaping=Escaping.ALLOW_UTF8)
    assert body == b'# TYPE renamed untyped\nrenamed{lab_el="b"} 1\n'


def test_two_utf8_names_for_one_legacy_name_are_served_legacy() -> None:
    """``a.b`` and ``a/b`` are one label to the bridge: which of them a series had is lost."""
    payload = b'# TYPE g gauge\ng{"a.b"="1"} 1\ng{"a/b"="2"} 2\n'
    families = read_exposition(payload, Format.TEXT).families
    body = write_exposition(families, Format.TEXT, escaping=Escaping.ALLOW_UTF8)
    assert body == b'# TYPE g gauge\ng{a_b="1"} 1\ng{a_b="2"} 2\n'


@pytest.mark.parametrize("scheme", list(Escaping))
@pytest.mark.parametrize("fmt", list(Format))
def test_legacy_payloads_are_the_same_bytes_under_every_escaping(
    fmt: Format, scheme: Escaping
) -> None:
    """SGLang's own names, `sglang:` included, are spelled the same whatever was negotiated."""
    families = read_exposition((FIXTURES / "tp1.prom").read_bytes(), Format.TEXT).families
    assert write_exposition(families, fmt, escaping=scheme) == write_exposition(families, fmt)
