"""The grammar of one sample line, shared by both wire formats (the slow, exact path).

Families that no rule touches never come here: ``exposition.reader`` copies their bytes. This
module is for families a rule must look inside, for lines the fast path could not vouch for,
and for ``validation: full``.
"""

from __future__ import annotations

import math
import re

from metricbridge.errors import LineError
from metricbridge.exposition.caches import PAIR_OVERHEAD, CodecCaches
from metricbridge.model.cache import ByteLRU
from metricbridge.model.family import Format, Labels, Sample
from metricbridge.model.names import LABEL_NAME, METRIC_NAME, legacy_name, quoted
from metricbridge.model.numbers import parse_value

_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SPACE = re.compile(r"[ \t]+")
_OM_TIMESTAMP = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Digits only, as Prometheus' scrape parser takes them (promlex.l); expfmt also reads a sign.
_TEXT_TIMESTAMP = re.compile(r"[0-9]+")
NAME_LABEL = "__name__"
# Prometheus keeps timestamps as int64 milliseconds: the text parser refuses a timestamp outside
# that range (``strconv.ParseInt(..., 10, 64)``, which fails the whole scrape), and the
# OpenMetrics parser converts ``ts * 1000`` to int64, which wraps outside it.
_MS_MIN, _MS_MAX = -(2**63), 2**63 - 1
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def unescape(text: str) -> str:
    r"""Undo label-value escaping: ``\\``, ``\"`` and ``\n``; any other ``\x`` stays as it is.

    OpenMetrics' ABNF allows a backslash before any character (``BS normal-char``: "'\\a' is
    equivalent to '\a'"), and Prometheus' parsers (``lvalReplacer`` in ``model/textparse``) and
    prometheus_client keep such a pair as the two characters it is; the writer then writes the
    backslash doubled. A lone backslash at the very end is kept too (a label value cannot end
    in one: it would escape the closing quote).
    """
    if "\\" not in text:
        return text
    return _ESCAPE.sub(_unescaped, text)


def _unescaped(match: re.Match[str]) -> str:
    return _ESCAPES.get(match.group(1), match.group(0))


def escape_label_value(value: str) -> str:
    """Escape a label value for either wire format."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


# Names read outside the legacy charset, noted by the parse that met them: (legacy name, UTF-8
# name, whether a label name). The reader keeps them with the family (``Spellings``).
Spelled = list[tuple[str, str, bool]]


def _read_name(line: str, pos: int, *, label: bool) -> tuple[str, int, str | None]:
    """Read a bare or quoted name at ``pos``: its legacy spelling, then the next position.

    Third, what a quoted name said, unescaped (None for a bare name).
    """
    if pos < len(line) and line[pos] == '"':
        match = _QUOTED.match(line, pos)
        if match is None:
            raise LineError(f"unterminated quoted name at column {pos + 1}")
        original = unescape(match.group(1))
        return legacy_name(original, label=label), match.end(), original
    match = (LABEL_NAME if label else METRIC_NAME).match(line, pos)
    if match is None:
        what = "label name" if label else "metric name"
        raise LineError(f"expected a {what} at column {pos + 1}")
    return match.group(), match.end(), None


def _note(spelled: Spelled | None, legacy: str, original: str, *, label: bool) -> None:
    if spelled is not None and legacy != original:
        spelled.append((legacy, original, label))


def _skip_space(line: str, pos: int) -> int:
    match = _SPACE.match(line, pos)
    return match.end() if match else pos


def _read_labels(  # noqa: PLR0913 - the grammar's switches, keyword-only
    line: str,
    pos: int,
    name: str | None,
    *,
    exemplar: bool = False,
    lenient: bool = False,
    spelled: Spelled | None = None,
) -> tuple[str | None, Labels, int]:
    """Read ``{...}`` starting after the brace; a leading quoted name is the metric name.

    A ``__name__`` label is refused in a sample's label set (not in an exemplar's): Prometheus'
    text and OpenMetrics parsers add the metric name as ``__name__`` and then this label too,
    and its storage refuses the duplicate name, failing the whole scrape
    (``label name "__name__" is not unique``). The metric name goes before the braces, or
    quoted without a value inside them (``{"name"}``, ``{a="b","name"}``).

    ``lenient`` is the text format's: Prometheus' text lexer reads the next label name after a
    value whether or not a comma stands between them (``{a="1" b="2"}``, promparse_test.go).
    """
    labels: list[tuple[str, str]] = []
    while True:
        pos = _skip_space(line, pos)
        if pos >= len(line):
            raise LineError("unterminated label set: missing '}'")
        if line[pos] == "}":
            return name, tuple(labels), pos + 1
        key, pos, original = _read_name(line, pos, label=True)
        pos = _skip_space(line, pos)
        # A quoted name without `=` is the metric name, first or not (Prometheus 3's
        # `{q="0.9","http.status"}`, openmetricsparse_test.go TestUTF8OpenMetricsParse).
        if original is not None and name is None and pos < len(line) and line[pos] in ",}":
            name = legacy_name(original)
            _note(spelled, name, original, label=False)
        else:
            if original is not None:
                _note(spelled, key, original, label=True)
            if key == NAME_LABEL and not exemplar:
                raise LineError(
                    f"a {NAME_LABEL!r} label in the label set; the metric name goes before "
                    "the braces"
                )
            pos = _read_label_value(line, pos, key, labels)
        if pos < len(line) and line[pos] == ",":
            pos += 1
        elif lenient and pos < len(line) and line[pos] != "}" and labels:
            continue
        elif pos >= len(line) or line[pos] != "}":
            raise LineError(f"expected ',' or '}}' at column {pos + 1}")


def _read_label_value(line: str, pos: int, key: str, labels: list[tuple[str, str]]) -> int:
    """Read ``="value"`` after the label name ``key`` into ``labels``; return the next position."""
    if pos >= len(line) or line[pos] != "=":
        raise LineError(f"expected '=' after label name {quoted(key)} at column {pos + 1}")
    pos = _skip_space(line, pos + 1)
    match = _QUOTED.match(line, pos)
    if match is None:
        raise LineError(f"label {quoted(key)}: value must be a double-quoted string")
    if any(key == seen for seen, _ in labels):
        raise LineError(f"label {quoted(key)} appears twice in the label set")
    labels.append((key, unescape(match.group(1))))
    return _skip_space(line, match.end())


# The shape prometheus_client writes: no escapes, no quoted names, one space, no timestamp.
_PLAIN_LINE = re.compile(
    r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*",)*'
    r'(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")?)\})? ([^ ]+)'
)
_PLAIN_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def _plain_labels(pairs: str, cache: ByteLRU[str, Labels] | None) -> Labels | None:
    """A plain label set split into pairs; None if a key repeats or is ``__name__``.

    The exact path reports either.

    A series keeps its label set from scrape to scrape, so ``cache`` (``read_label_sets``)
    keeps each split by its text; sets with a repeated key are never kept.
    """
    labels = cache.get(pairs) if cache is not None else None
    if labels is None:
        labels = tuple(_PLAIN_PAIR.findall(pairs))
        keys = {key for key, _ in labels}
        if len(keys) != len(labels) or NAME_LABEL in keys:
            return None
        if cache is not None:
            # labels_size(labels) without a pass over the pairs: a plain set's names and
            # values are its text but ="" for each pair and a comma between two (and maybe
            # one at the end).
            count = len(labels)
            held = len(pairs) - 4 * count + 1 - pairs.endswith(",") + PAIR_OVERHEAD * count
            cache.put(pairs, labels, len(pairs) + held)
    return labels


_HEADER = re.compile(r'# (HELP|TYPE|UNIT) ("(?:[^"\\]|\\.)*"|\S+)(?: (.*))?')
# The text lexer takes any run of blanks between a header's words (`# \tTYPE name summary`,
# promparse_test.go; `#    TYPE    name2 gauge`, expfmt's TestTextParse).
_TEXT_HEADER = re.compile(r'#[ \t]+(HELP|TYPE)[ \t]+("(?:[^"\\]|\\.)*"|[^ \t]+)(?:[ \t]+(.*))?')


def header_words(text: str, fmt: Format) -> tuple[str, str, str] | None:
    """A HELP, TYPE or UNIT line's keyword, name (quoted as it came, if quoted) and rest.

    None for a comment that is no header (the text format allows free-form ones).
    """
    parts = text.split(" ", 3)
    if (
        len(parts) >= 3
        and parts[0] == "#"
        and parts[1] in ("HELP", "TYPE", "UNIT")
        and parts[2]
        and not parts[2].startswith('"')
    ):
        return parts[1], parts[2], parts[3] if len(parts) == 4 else ""
    match = _HEADER.fullmatch(text)  # quoted UTF-8 names, or not a header at all
    if match is None and fmt is Format.TEXT:
        match = _TEXT_HEADER.fullmatch(text)
    if match is None:
        return None
    return match.group(1), match.group(2), match.group(3) or ""


def parse_sample(
    line: str, fmt: Format, *, caches: CodecCaches | None = None, spelled: Spelled | None = None
) -> Sample:
    """Parse one sample line of either format; raise ``LineError`` naming what is wrong.

    Names read outside the legacy charset are added to ``spelled``, if given.
    """
    plain = _PLAIN_LINE.fullmatch(line)
    if plain is not None:
        name, pairs, raw = plain.groups()
        parsed = parse_value(raw)
        if parsed is not None:
            cache = caches.read_label_sets if caches is not None else None
            labels = _plain_labels(pairs, cache) if pairs else ()
            if labels is not None:
                return Sample(name, labels, parsed[0], parsed[1])
    return _parse_general(line, fmt, spelled)


def _leading_name(line: str, spelled: Spelled | None, *, text: bool) -> tuple[str, int]:
    """The metric name a line starts with, and where its label set or value starts."""
    name, pos, original = _read_name(line, 0, label=False)
    if original is not None:
        _note(spelled, name, original, label=False)
    # Prometheus' text lexer skips blanks between a name and its braces (`name {a="b"} 1`,
    # promparse_test.go); OpenMetrics' ABNF has none there.
    after = _skip_space(line, pos) if text else pos
    if after < len(line) and line[after] == "{":
        pos = after
    return name, pos


def _parse_general(line: str, fmt: Format, spelled: Spelled | None = None) -> Sample:
    """The full grammar: escapes, quoted UTF-8 names, timestamps, exemplars, errors."""
    name: str | None = None
    pos = 0
    text = fmt is Format.TEXT
    if not line.startswith("{"):
        name, pos = _leading_name(line, spelled, text=text)
    labels: Labels = ()
    if pos < len(line) and line[pos] == "{":
        name, labels, pos = _read_labels(line, pos + 1, name, lenient=text, spelled=spelled)
    if name is None:
        raise LineError("sample has no metric name")
    rest, exemplar = line[pos:], None
    if fmt is Format.OPENMETRICS and " # " in rest:
        rest, exemplar = rest.split(" # ", 1)
        _check_exemplar(exemplar)
    # The text lexer also reads a value straight after the closing brace (`a{b="c"}1`).
    braced = text and bool(labels) and line[pos - 1] == "}"
    if (not rest or rest[0] not in " \t") and not (braced and rest):
        raise LineError(f"expected a space before the value at column {pos + 1}")
    tokens = rest.split()
    if not tokens:
        raise LineError("missing value")
    if len(tokens) > 2:
        raise LineError(f"unexpected text after the value: {quoted(' '.join(tokens[2:]))}")
    parsed = parse_value(tokens[0])
    if parsed is None:
        raise LineError(f"invalid value {quoted(tokens[0])}")
    timestamp = _parse_timestamp(tokens[1], fmt) if len(tokens) == 2 else None
    return Sample(name, labels, parsed[0], parsed[1], timestamp, exemplar)


# OpenMetrics: "The combined length of the label names and values of an Exemplar's LabelSet MUST
# NOT exceed 128 UTF-8 character code points."
EXEMPLAR_LABELS_MAX = 128


def _check_exemplar(text: str) -> None:
    """Refuse an exemplar (the text after `` # ``) that breaks the ABNF.

    It is kept as text (``Sample.exemplar``), so only its validity is needed here. Its length
    is not the line's business: Prometheus reads the sample of an exemplar too long and stores
    the sample alone (``exemplar_labels_length``).
    """
    if not text.startswith("{"):
        raise LineError("exemplar: expected '{' after ' # '")
    try:
        # A name that is not None: a quoted metric name is not allowed in an exemplar.
        _, _, pos = _read_labels(text, 1, "", exemplar=True)
    except LineError as exc:
        raise LineError(f"exemplar: {exc}") from None
    tokens = text[pos + 1 :].split(" ") if text.startswith(" ", pos) else []
    if not 1 <= len(tokens) <= 2 or not all(tokens):
        raise LineError("exemplar: expected ' VALUE' or ' VALUE TIMESTAMP' after its labels")
    if parse_value(tokens[0]) is None:
        raise LineError(f"exemplar: invalid value {quoted(tokens[0])}")
    if len(tokens) == 2:
        try:
            _parse_timestamp(tokens[1], Format.OPENMETRICS)
        except LineError as exc:
            raise LineError(f"exemplar: {exc}") from None


def exemplar_labels_length(text: str) -> int:
    """The characters of an exemplar's label names and values (``text``: a valid exemplar)."""
    _, labels, _ = _read_labels(text, 1, "", exemplar=True)
    return sum(len(key) + len(value) for key, value in labels)


def _parse_timestamp(token: str, fmt: Format) -> float:
    if fmt is Format.TEXT:
        if not _TEXT_TIMESTAMP.fullmatch(token):
            raise LineError(
                f"invalid timestamp {quoted(token)}: the text format wants milliseconds in digits"
            )
        milliseconds = int(token)
        # The second test: near the bounds, seconds as a float round back to a number past them.
        if not _MS_MIN <= milliseconds <= _MS_MAX or not _in_range(milliseconds / 1000.0):
            raise LineError(_out_of_range(token))
        return milliseconds / 1000.0
    if not _OM_TIMESTAMP.fullmatch(token):
        raise LineError(f"invalid timestamp {quoted(token)}")
    value = float(token)
    if not math.isfinite(value) or not _in_range(value):  # 1e999 and 1e17 alike
        raise LineError(_out_of_range(token))
    return value


def _in_range(seconds: float) -> bool:
    """Whether the timestamp, as the writer spells it in milliseconds, fits Prometheus' int64."""
    return _MS_MIN <= round(seconds * 1000) <= _MS_MAX


def _out_of_range(token: str) -> str:
    return f"invalid timestamp {quoted(token)}: out of range"
