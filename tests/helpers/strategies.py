"""Hypothesis strategies for metricbridge's property tests (as attrs keeps ``tests/strategies.py``).

Inputs are built as plain data (``Fam`` of ``Line``) and rendered by a small renderer of our own,
never by metricbridge's writer, so a bug in the writer cannot hide in its own test inputs. The
renderer writes what prometheus_client writes (text: a counter family named ``<base>_total`` and
``_created`` series as a separate ``<base>_created`` gauge family; OpenMetrics: ``# TYPE <base>
counter`` and ``_created`` next to each series, ``# EOF`` last), plus the liberties each format
allows: header-less untyped families, a trailing comma in a text label set, ``{}`` for an empty
one, free-form comment lines inside a text family, lax number spellings (``inf``, ``nan``,
``Infinity``), HELP before or after TYPE, timestamps, exemplars, ``# UNIT``.

The flags on ``expositions`` switch individual liberties off; the property tests only do that to
step around a bug that has its own ``xfail(strict=True)`` reproducer in ``test_properties.py``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache

import yaml
from hypothesis import strategies as st

from metricbridge.model.family import Format

Labels = tuple[tuple[str, str], ...]
ValueKey = float | str  # a float, or "NaN" (so that NaN == NaN in a multiset)
SampleKey = tuple[str, Labels, ValueKey]

# A base name ending in one of these could collide with another family's sample names.
RESERVED_SUFFIXES = (
    "_total",
    "_created",
    "_bucket",
    "_sum",
    "_count",
    "_info",
    "_gsum",
    "_gcount",
)
KINDS = ("counter", "gauge", "histogram", "summary", "untyped")
SCALABLE_KINDS = ("counter", "gauge", "histogram", "summary")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_TOKENS = ("a", "b", "req", "time", "x1", "seconds", "bytes", "q")


# --- building blocks (each strategy is built once: constructing them per draw is slow) -----


@cache
def _index(size: int) -> st.SearchStrategy[int]:
    return st.integers(0, size - 1)


def _pick(draw: st.DrawFn, options: tuple | list):
    """One of ``options``, shrinking towards the first."""
    return options[draw(_index(len(options)))]


def _valid_base(name: str) -> bool:
    return (
        _METRIC_NAME.fullmatch(name) is not None
        and not name.startswith("__")
        and not name.endswith(RESERVED_SUFFIXES)
    )


@st.composite
def _token_names(draw: st.DrawFn) -> str:
    """Names from a tiny vocabulary joined by ``_`` or ``:``, so near-collisions are common."""
    name = _pick(draw, _TOKENS)
    for _ in range(draw(_index(3))):
        name += _pick(draw, ("_", ":")) + _pick(draw, _TOKENS)
    return name


@cache
def metric_names() -> st.SearchStrategy[str]:
    """Legacy-charset metric base names (``:`` included) that end in no reserved suffix."""
    return st.one_of(
        _token_names(),
        st.from_regex(r"\A[a-zA-Z_:][a-zA-Z0-9_:]{0,12}\Z"),
    ).filter(_valid_base)


@cache
def label_names() -> st.SearchStrategy[str]:
    """Legacy label names that are neither reserved (``__``) nor shape labels (le, quantile)."""
    return st.one_of(
        st.sampled_from(["a", "b", "path", "model_name", "x"]),
        st.from_regex(r"\A[a-zA-Z_][a-zA-Z0-9_]{0,8}\Z"),
    ).filter(lambda n: not n.startswith("__") and n not in ("le", "quantile"))


_SPECIAL_VALUES = [
    "__name__",
    "le",
    "quantile",
    "not a name",
    "",
    "\\",
    '"',
    "\n",
    "\\n",
    '\\"',
    "a b",
    " # ",
    "#",
    "{}",
    ",",
    "=",
    "\t",
    "é",
]


@cache
def label_values() -> st.SearchStrategy[str]:
    """Any unicode text but NUL and surrogates: backslashes, quotes and newlines included.

    Half the draws come from a short list of troublemakers (label names among them, for
    relabel steps whose target label is a label's value).
    """
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
    special = st.sampled_from(_SPECIAL_VALUES)
    return st.one_of(
        special,
        special,
        st.text(chars, max_size=6),
        st.text(st.sampled_from('ab\\"\n #{},='), max_size=6),
    )


@cache
def help_texts() -> st.SearchStrategy[str | None]:
    """HELP text, or None for no HELP line (no CR, which would end a line as CRLF)."""
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r")
    return st.none() | st.text(chars, min_size=1, max_size=12)


_LABEL_NAME_LISTS = st.lists(label_names(), unique=True, max_size=3)
_BOOLS = st.booleans()
_TIMESTAMPS = st.integers(0, 2 * 10**12)
_CREATED = st.floats(1e9, 2e9)
_COUNTS = st.integers(0, 50)
_BIG_COUNTS = st.integers(0, 10**6)
_BOUND_INTS = st.lists(st.integers(0, 10**6), unique=True, max_size=5)
_QUANTILES = st.lists(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]), unique=True)
_EXEMPLARS = st.none() | st.builds(
    lambda trace, value: f'{{trace_id="{trace}"}} {value}',
    st.from_regex(r"\A[0-9a-f]{1,8}\Z"),
    st.sampled_from(["0.5", "1", "1e-3"]),
)


@cache
def _label_rows(width: int) -> st.SearchStrategy[list[tuple[str, ...]]]:
    return st.lists(st.tuples(*[label_values()] * width), unique=True, min_size=1, max_size=3)


# --- values -------------------------------------------------------------------------------

_LAX = {
    "nan": ("NaN", "nan"),
    "inf": ("+Inf", "inf", "Inf", "+Infinity"),
    "-inf": ("-Inf", "-inf", "-Infinity"),
}


def spell(draw: st.DrawFn, value: float, *, lax: bool = False) -> str:
    """A spelling of a sample value both wire formats accept (``lax``: Go-style too)."""
    if math.isnan(value) or math.isinf(value):
        options = _LAX[repr(value)]
        return _pick(draw, options) if lax else options[0]
    options = [repr(value), f"{value:.17g}"]
    if value.is_integer() and abs(value) < 1e15:
        options.append(str(int(value)))
    return _pick(draw, options)


@cache
def _floats(
    *, bounded: bool, nonneg: bool = False, special: bool = True
) -> st.SearchStrategy[float]:
    """Sample values; ``bounded`` keeps them where scaling by 1e-6..1e6 cannot under/overflow."""
    if bounded:
        low = 0.0 if nonneg else -1e200
        finite = st.floats(low, 1e200).filter(lambda v: v == 0 or abs(v) > 1e-200)
    else:
        finite = st.floats(min_value=0.0 if nonneg else None, allow_nan=False, allow_infinity=False)
    if not special:
        return finite
    specials = [math.inf] if nonneg else [math.inf, -math.inf, math.nan]
    return st.one_of(finite, st.sampled_from(specials))


def value_key(value: float) -> ValueKey:
    """A hashable key that treats NaN as equal to NaN."""
    return "NaN" if math.isnan(value) else float(value)


# --- the model of a family ----------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One sample line: name suffix, labels in written order, value and its spelling."""

    suffix: str
    labels: Labels
    value: float
    text: str
    timestamp_ms: int | None = None
    exemplar: str | None = None  # OpenMetrics only: the text after " # "


@dataclass(frozen=True)
class Fam:
    """A generated family; ``lines`` are in OpenMetrics order (grouped by series)."""

    base: str
    kind: str
    lines: tuple[Line, ...]
    help: str | None = None
    unit: str | None = None
    headerless: bool = False  # untyped only: samples with no HELP/TYPE lines at all
    type_first: bool = False  # TYPE before HELP
    trailing_comma: bool = False  # text only: `{a="1",}`
    empty_braces: bool = False  # `name{} 1` for series without labels
    comment_at: int | None = None  # text only: a free-form `# ...` line before this line
    label_names: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The family name a rule uses (counters: the ``_total`` name)."""
        return self.base + "_total" if self.kind == "counter" else self.base

    def sample_names(self) -> set[str]:
        """Every sample name this family's lines carry."""
        return {self.base + line.suffix for line in self.lines}


@dataclass(frozen=True)
class Opts:
    """What liberties generated families may take (see ``expositions``)."""

    lax: bool = True
    bounded: bool = False
    created: bool = True
    trailing_comma: bool = True
    empty_braces: bool = True
    comments: bool = True


def _series(draw: st.DrawFn) -> tuple[tuple[str, ...], list[Labels]]:
    names = tuple(draw(_LABEL_NAME_LISTS))
    if not names:
        return names, [()] * draw(_index(2))
    rows = draw(_label_rows(len(names)))
    return names, [tuple(zip(names, row, strict=True)) for row in rows]


def _created(draw: st.DrawFn, labels: Labels) -> Line:
    stamp = draw(_CREATED)
    return Line("_created", labels, stamp, repr(stamp))


def _gauge_lines(draw: st.DrawFn, series: list[Labels], opts: Opts) -> list[Line]:
    stamped = draw(_BOOLS)
    lines = []
    for labels in series:
        value = draw(_floats(bounded=opts.bounded))
        stamp = draw(_TIMESTAMPS) if stamped else None
        lines.append(Line("", labels, value, spell(draw, value, lax=opts.lax), stamp))
    return lines


def _counter_lines(draw: st.DrawFn, series: list[Labels], opts: Opts) -> list[Line]:
    with_created = opts.created and draw(_BOOLS)
    lines = []
    for labels in series:
        value = draw(_floats(bounded=opts.bounded, nonneg=True))
        text = spell(draw, value, lax=opts.lax)
        lines.append(Line("_total", labels, value, text, None, draw(_EXEMPLARS)))
        if with_created:
            lines.append(_created(draw, labels))
    return lines


def _histogram_lines(draw: st.DrawFn, series: list[Labels], opts: Opts) -> list[Line]:
    """Cumulative buckets over strictly increasing, well separated, non-negative bounds."""
    divisor = _pick(draw, (1, 10, 1000))
    bounds = sorted(i / divisor for i in draw(_BOUND_INTS))
    integral = draw(_BOOLS)
    les = [str(int(b)) if integral and b.is_integer() else repr(b) for b in bounds] + ["+Inf"]
    with_created = opts.created and draw(_BOOLS)
    width = len(series[0]) if series else 0
    le_at = draw(_index(width + 1))
    lines = []
    for labels in series:
        total = 0
        for le in les:
            total += draw(_COUNTS)
            bucket_labels = (*labels[:le_at], ("le", le), *labels[le_at:])
            text = spell(draw, float(total))
            lines.append(Line("_bucket", bucket_labels, float(total), text, None, draw(_EXEMPLARS)))
        lines.append(Line("_count", labels, float(total), spell(draw, float(total))))
        total_sum = draw(_floats(bounded=opts.bounded, nonneg=True, special=False))
        lines.append(Line("_sum", labels, total_sum, spell(draw, total_sum, lax=opts.lax)))
        if with_created:
            lines.append(_created(draw, labels))
    return lines


def _summary_lines(draw: st.DrawFn, series: list[Labels], opts: Opts) -> list[Line]:
    quantiles = sorted(draw(_QUANTILES))
    with_created = opts.created and draw(_BOOLS)
    values = _floats(bounded=opts.bounded, nonneg=True) | st.just(math.nan)
    lines = []
    for labels in series:
        for q in quantiles:
            value = draw(values)
            text = spell(draw, value, lax=opts.lax)
            lines.append(Line("", (*labels, ("quantile", repr(q))), value, text))
        total_sum = draw(_floats(bounded=opts.bounded, nonneg=True, special=False))
        count = float(draw(_BIG_COUNTS))
        lines.append(Line("_sum", labels, total_sum, spell(draw, total_sum, lax=opts.lax)))
        lines.append(Line("_count", labels, count, spell(draw, count)))
        if with_created:
            lines.append(_created(draw, labels))
    return lines


_LINES = {
    "counter": _counter_lines,
    "gauge": _gauge_lines,
    "histogram": _histogram_lines,
    "summary": _summary_lines,
    "untyped": _gauge_lines,
}


@st.composite
def families(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS, opts: Opts = Opts()) -> Fam:
    """One family of one of ``kinds`` (counter, gauge, histogram, summary, untyped)."""
    kind = _pick(draw, kinds)
    base = draw(metric_names())
    names, series = _series(draw)
    lines = _LINES[kind](draw, series, opts)
    last = base.rsplit("_", 1)[-1]
    unit = last if "_" in base and last and kind != "untyped" and draw(_BOOLS) else None
    return Fam(
        base=base,
        kind=kind,
        lines=tuple(lines),
        help=draw(help_texts()),
        unit=unit,
        headerless=kind == "untyped" and draw(_BOOLS),
        type_first=draw(_BOOLS),
        trailing_comma=opts.trailing_comma and draw(_BOOLS),
        empty_braces=opts.empty_braces and draw(_BOOLS),
        comment_at=draw(_index(len(lines))) if opts.comments and lines and draw(_BOOLS) else None,
        label_names=names,
    )


def _escaped(base: str) -> str:
    return base.replace(":", "_")


@st.composite
def _plant_escaped_siblings(draw: st.DrawFn, fams: list[Fam]) -> list[Fam]:
    """After some family ``x:y``, add a header-less ``x_y`` holding the same series."""
    bases = {f.base for f in fams}
    out: list[Fam] = []
    for fam in fams:
        out.append(fam)
        sibling = _escaped(fam.base)
        if (
            ":" in fam.base
            and fam.lines  # an empty `x:y` followed by `x_y` is client_python#1177's own shape
            and fam.kind in ("gauge", "untyped")
            and sibling not in bases
            and _valid_base(sibling)
            and draw(_BOOLS)
        ):
            lines = tuple(replace(line, timestamp_ms=None) for line in fam.lines)
            out.append(Fam(sibling, "untyped", lines, headerless=True, label_names=fam.label_names))
            bases.add(sibling)
    return out


@cache
def expositions(  # noqa: PLR0913 - one flag per liberty
    *,
    kinds: tuple[str, ...] = KINDS,
    min_size: int = 0,
    max_size: int = 5,
    lax: bool = True,
    bounded: bool = False,
    created: bool = True,
    trailing_comma: bool = True,
    empty_braces: bool = True,
    comments: bool = True,
) -> st.SearchStrategy[list[Fam]]:
    """Families with distinct base names (so no two families' sample names can collide).

    ``lax``: Go-style value spellings; ``bounded``: values safe to scale by 1e-6..1e6;
    ``created``: ``_created`` series; ``trailing_comma`` (text) and ``empty_braces``: label-set
    spellings; ``comments``: free-form comment lines inside a text family. Some families
    ``x:y`` are followed by a header-less ``x_y`` with the same series (client_python#1177's
    escaping makes that layout worth a dedicated draw; by chance it would be rare).
    """
    opts = Opts(lax, bounded, created, trailing_comma, empty_braces, comments)
    lists = st.lists(
        families(kinds, opts), min_size=min_size, max_size=max_size, unique_by=lambda f: f.base
    )
    return lists.flatmap(_plant_escaped_siblings)


# --- the independent renderer -------------------------------------------------------------


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str, fmt: Format) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if fmt is Format.OPENMETRICS else text


def _label_text(fam: Fam, labels: Labels, fmt: Format) -> str:
    if not labels:
        return "{}" if fam.empty_braces else ""
    body = ",".join(f'{key}="{_escape_value(value)}"' for key, value in labels)
    if fam.trailing_comma and fmt is Format.TEXT:
        body += ","
    return "{" + body + "}"


def _line_text(fam: Fam, line: Line, name: str, fmt: Format) -> str:
    out = f"{name}{_label_text(fam, line.labels, fmt)} {line.text}"
    if line.timestamp_ms is not None:
        if fmt is Format.TEXT:
            out += f" {line.timestamp_ms}"
        else:
            out += f" {line.timestamp_ms // 1000}.{line.timestamp_ms % 1000:03d}"
    if line.exemplar is not None and fmt is Format.OPENMETRICS:
        out += " # " + line.exemplar
    return out + "\n"


def _header(fam: Fam, name: str, type_name: str, fmt: Format) -> list[str]:
    help_line = [] if fam.help is None else [f"# HELP {name} {_escape_help(fam.help, fmt)}\n"]
    type_line = [f"# TYPE {name} {type_name}\n"]
    lines = type_line + help_line if fam.type_first else help_line + type_line
    if fmt is Format.OPENMETRICS and fam.unit is not None:
        lines.append(f"# UNIT {name} {fam.unit}\n")
    return lines


def render_family(fam: Fam, fmt: Format) -> str:
    """One family in the given wire format, the way prometheus_client lays it out."""
    out: list[str] = []
    if fmt is Format.OPENMETRICS:
        type_name = "unknown" if fam.kind == "untyped" else fam.kind
        if not fam.headerless:
            out += _header(fam, fam.base, type_name, fmt)
        out += [_line_text(fam, line, fam.base + line.suffix, fmt) for line in fam.lines]
        return "".join(out)
    name = fam.name
    if not fam.headerless:
        out += _header(fam, name, fam.kind, fmt)
    for i, line in enumerate(fam.lines):
        if i == fam.comment_at:
            out.append("# a free-form comment, allowed anywhere in the text format\n")
        if line.suffix != "_created":
            out.append(_line_text(fam, line, fam.base + line.suffix, fmt))
    created = [line for line in fam.lines if line.suffix == "_created"]
    if created:
        # prometheus_client's text format: `_created` series are a gauge family of their own.
        out += _header(fam, fam.base + "_created", "gauge", fmt)
        out += [_line_text(fam, line, fam.base + "_created", fmt) for line in created]
    return "".join(out)


def render(fams: list[Fam], fmt: Format) -> bytes:
    """A whole exposition; OpenMetrics ends with ``# EOF``."""
    text = "".join(render_family(fam, fmt) for fam in fams)
    if fmt is Format.OPENMETRICS:
        text += "# EOF\n"
    return text.encode()


def expected_samples(fams: list[Fam]) -> Counter[SampleKey]:
    """The (name, sorted labels, value) multiset the generated families hold."""
    return Counter(
        (fam.base + line.suffix, tuple(sorted(line.labels)), value_key(line.value))
        for fam in fams
        for line in fam.lines
    )


# --- rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One ``families:`` entry of a rules file, kept as data so tests can predict its effect."""

    name: str
    disposition: str
    type: str | None = None
    source: str | None = None
    keep_source: bool | None = None
    factor: float | None = None
    match: dict[str, str] = field(default_factory=dict)
    relabel: tuple[dict[str, object], ...] = ()
    source_fam: Fam | None = None
    target_exists: bool = False

    def body(self) -> dict[str, object]:
        """The YAML mapping of this rule."""
        out: dict[str, object] = {"disposition": self.disposition}
        for key in ("type", "source", "keep_source", "factor"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.match:
            out["match"] = dict(self.match)
        if self.relabel:
            out["relabel"] = [dict(step) for step in self.relabel]
        return out


def config_text(rules: list[Rule] | tuple[Rule, ...], validation: str | None = None) -> str:
    """A version-1 rules file holding ``rules``."""
    doc: dict[str, object] = {"version": 1}
    if validation is not None:
        doc["validation"] = validation
    if rules:
        doc["families"] = {rule.name: rule.body() for rule in rules}
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


_POSITIVE_FACTORS = st.one_of(
    st.sampled_from([1000.0, 0.001, 100.0, 0.01, 60.0, 1 / 60, 1e-6, 1e6, 2.5]),
    st.floats(1e-6, 1e6),
)
_ANY_FACTORS = _POSITIVE_FACTORS | _POSITIVE_FACTORS.map(lambda f: -f)


def factors(kind: str) -> st.SearchStrategy[float]:
    """Scale factors valid for the kind (negative only for gauges), 1e-6..1e6 in magnitude."""
    return _ANY_FACTORS if kind == "gauge" else _POSITIVE_FACTORS


def _fresh_base(draw: st.DrawFn, taken: set[str]) -> str:
    base = draw(metric_names())
    while base in taken or _escaped(base) in taken:
        base += _pick(draw, ("_n", ":n", "x"))
    taken.update({base, _escaped(base)})
    return base


def _relabel_step(  # noqa: PLR0911 - one return per kind of step
    draw: st.DrawFn, fam: Fam, *, name_target: bool
) -> dict[str, object]:
    """One valid relabel step for the family; a template target may expand to any label value,
    valid label name or not (``name_target``: ``__name__`` too)."""
    names = fam.label_names
    if not names:
        return {"action": "labeldrop", "regex": "nothing_matches"}
    name = _pick(draw, names)
    values = [value for line in fam.lines for key, value in line.labels if key == name] or [""]
    kinds = ("template", "copy", "labeldrop", "labelkeep", "keep", "drop", "set", "labelmap")
    kind = _pick(draw, kinds)
    if kind == "copy":
        return {"source_labels": [name], "target_label": draw(label_names()), "replacement": "$1"}
    if kind == "labeldrop":
        return {"action": "labeldrop", "regex": re.escape(name)}
    if kind == "labelkeep":
        return {"action": "labelkeep", "regex": re.escape(name) if draw(_BOOLS) else "x"}
    if kind in ("keep", "drop"):
        return {"source_labels": [name], "regex": re.escape(_pick(draw, values)), "action": kind}
    if kind == "set":
        return {
            "source_labels": [name],
            "regex": ".*",
            "target_label": draw(label_names()),
            "replacement": _pick(draw, ("const", "", "x y")),
        }
    if kind == "template":  # one of the label's values names the target label
        value = _pick(draw, values)
        if value == "__name__" and not name_target:
            value = "x"  # test_relabel_template_target_label_is_validated[reserved-__name__]
        regex = f"({re.escape(value)})"
        return {"source_labels": [name], "regex": regex, "target_label": "$1", "replacement": "v"}
    return {"action": "labelmap", "regex": f"({re.escape(name)})", "replacement": "copy_$1"}


def _existing_targets(fams: list[Fam], avoid: set[str], mtype: str) -> list[str]:
    """Upstream family names a rule of ``mtype`` may target (and must then leave alone)."""
    return [
        f.name
        for f in fams
        if f.name not in avoid
        and (f.lines or not f.headerless)  # a header-less family without samples is absent
        and (f.kind == "counter") == (mtype == "counter")  # a counter rule's name ends in _total
    ]


@st.composite
def rule_sets(  # noqa: C901, PLR0913 - one branch per disposition
    draw: st.DrawFn,
    fams: list[Fam],
    *,
    ops: tuple[str, ...] = ("alias", "scale", "select", "relabel", "drop"),
    existing_targets: bool = True,
    type_mismatch: bool = True,
    name_target: bool = False,
) -> tuple[Rule, ...]:
    """Valid rules over the families: up to three sources, one rule each.

    Targets are fresh names, or (``existing_targets``) the name of another upstream family, in
    which case the upstream family must win. ``type_mismatch`` sometimes declares a wrong type
    (the source then passes through). ``name_target``: see ``_relabel_step``.
    """
    typed = [f for f in fams if f.kind in SCALABLE_KINDS]
    if not typed:
        return ()
    sources = [typed[i] for i in draw(st.lists(_index(len(typed)), unique=True, max_size=3))]
    taken = {f.base for f in fams} | {_escaped(f.base) for f in fams}
    avoid = {f.name for f in sources}
    rules = []
    for fam in sources:
        op = _pick(draw, ops)
        if op == "select" and not (fam.label_names and fam.lines):
            op = "alias"
        mtype = fam.kind
        if type_mismatch and op != "drop" and draw(_index(10)) == 0:
            mtype = _pick(draw, [k for k in ("gauge", "histogram", "summary") if k != fam.kind])
        if op == "drop":
            rules.append(Rule(fam.name, "drop", source_fam=fam))
            continue
        if op == "relabel" and mtype == fam.kind and draw(_BOOLS):  # in place
            steps = tuple(
                _relabel_step(draw, fam, name_target=name_target)
                for _ in range(1 + draw(_index(2)))
            )
            rules.append(Rule(fam.name, "relabel", mtype, relabel=steps, source_fam=fam))
            continue
        existing = _existing_targets(fams, avoid, mtype) if existing_targets else []
        if existing and draw(_BOOLS):
            target, exists = _pick(draw, existing), True
        else:
            base = _fresh_base(draw, taken)
            target, exists = (base + "_total" if mtype == "counter" else base), False
        avoid.add(target)
        rule = Rule(
            target,
            op,
            mtype,
            source=fam.name,
            keep_source=draw(_BOOLS),
            source_fam=fam,
            target_exists=exists,
        )
        if op == "scale":
            rule = replace(rule, factor=draw(factors(mtype)))
        elif op == "select":
            labels = _pick(draw, [line.labels for line in fam.lines])
            picked = [pair for pair in labels if pair[0] not in ("le", "quantile") and draw(_BOOLS)]
            rule = replace(rule, match=dict(picked) or {fam.label_names[0]: "none"})
        elif op == "relabel":
            steps = tuple(
                _relabel_step(draw, fam, name_target=name_target)
                for _ in range(1 + draw(_index(2)))
            )
            rule = replace(rule, relabel=steps)
        rules.append(rule)
    return tuple(rules)


# --- mutations and junk -------------------------------------------------------------------

_INTERESTING = [
    b"\n", b"#", b" ", b"{", b"}", b'"', b"\\", b",", b"=", b"\r", b"\x00", b"\xff", b"\t",
    b"# EOF\n", b"# TYPE ", b"# HELP ", b"# UNIT ", b"_total", b"_bucket", b'le="', b"NaN",
    b"+Inf", b" counter\n", b" histogram\n", b" info\n", b" stateset\n", b" gaugehistogram\n",
    b"\xc3", b"\xe2\x80\xa8", b"_created", b"{}", b" 1\n", b"le", b"quantile",
]  # fmt: skip


_INSERTS = st.sampled_from(_INTERESTING) | st.binary(min_size=1, max_size=3)


@st.composite
def mutate(draw: st.DrawFn, payload: bytes) -> bytes:
    """Truncate, flip, delete, insert bytes or duplicate a line, one to three times."""
    data = bytearray(payload)
    for _ in range(1 + draw(_index(3))):
        if not data:
            break
        op = _pick(draw, ("cut", "flip", "del", "ins", "dup"))
        at = draw(_index(len(data)))
        if op == "cut":
            del data[at:]
        elif op == "flip":
            data[at] ^= 1 + draw(_index(255))
        elif op == "del":
            del data[at : at + 1 + draw(_index(3))]
        elif op == "ins":
            data[at:at] = draw(_INSERTS)
        else:
            lines = bytes(data).split(b"\n")
            which = draw(_index(len(lines)))
            lines.insert(which, lines[which])
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def junk() -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, and byte soup made of exposition tokens (reaches deeper into the reader)."""
    tokens = st.sampled_from(
        [*_INTERESTING, b"foo", b"foo_sum", b"a:b", b"1", b"0.5", b"-1", b" # "]
    )
    return st.binary(max_size=200) | st.lists(tokens, max_size=40).map(b"".join)
