"""What an engine release says about a family a payload lacks: later, behind a switch, or gone.

A snapshot taken before the first request lacks every family SGLang creates lazily; a server
started without HiCache lacks the HiCache families. Neither is a broken dashboard, and the
release catalogues (``metricbridge.engines``) tell them from a name the release no longer has,
or never had. ``EngineView`` answers for one release and one payload:

- ``lazy``: the release creates the family on an event (``first call of log_stats()``) the
  payload has not seen yet. Not failing.
- ``feature``: the release ties it to a feature switch (``--enable-hierarchical-cache``). Not
  failing.
- ``dead``: the release defines it, but nothing in it ever records a value. Failing.
- ``no such sample``: the release defines the family with a type that has no sample of the
  selected name (the bare name of a histogram, a gauge turned histogram). Failing.
- ``startup``: the release exports it from start-up, so a scrape of that process has it.
  Failing: the payload is of another process or another release.
- ``removed``: an older catalogued release had it and this one does not (``renamed_to`` when the
  catalogues show what it became). Failing.
- ``newer``: only releases after this one define it. Failing.

A name no catalogued release defines gets no note at all. Pure: the packaged catalogues and
the payload's family names in, notes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from metricbridge.engines import (
    Catalogue,
    EngineFamily,
    available_versions,
    diff_catalogues,
    feature_switch,
    load_catalogue,
    version_key,
)
from metricbridge.translation.contract_index import ContractIndex, MissingClass
from metricbridge.translation.translate import RowState

__all__ = ["EngineClass", "EngineNote", "EngineView", "explain_missing_rows"]


class EngineClass(StrEnum):
    """How a release explains a family the payload lacks (the values are the report's words)."""

    LAZY = "lazy"  # created on an event the payload has not seen yet
    FEATURE = "feature"  # needs a feature switch
    DEAD = "dead"  # defined, but never recorded
    NO_SAMPLE = "no such sample"  # defined, but its type has no sample of that name
    STARTUP = "startup"  # exported from start-up: the payload should have it
    REMOVED = "removed"  # an older release had it, this one does not
    NEWER = "newer"  # only newer releases define it


_NOT_FAILING = frozenset({EngineClass.LAZY, EngineClass.FEATURE})
# When a row waits for several families, the note that decides: what can never come first.
_PRECEDENCE = (
    EngineClass.REMOVED,
    EngineClass.NO_SAMPLE,
    EngineClass.DEAD,
    EngineClass.NEWER,
    EngineClass.STARTUP,
    EngineClass.FEATURE,
    EngineClass.LAZY,
)
_RENAME_CHAIN = 8  # renames followed from one release to the next, at most


@dataclass(frozen=True, slots=True)
class EngineNote:
    """The release's explanation for one family; ``detail`` is the sentence a report shows.

    ``release`` is the engine release asked about and ``family`` the engine family concerned
    (a contract row's source, for a row). ``event`` is when a lazy (or feature) family appears;
    ``switches`` what turns its features on. A removed family was last in ``last_in`` and
    gone from ``removed_in``; ``renamed_to`` is what it became (in the asked release), and
    ``replacement`` the sample of that name a query would select instead. A newer family
    appears from ``added_in``.
    """

    cls: EngineClass
    engine: str
    release: str
    family: str
    detail: str
    event: str | None = None
    switches: tuple[str, ...] = ()
    last_in: str | None = None
    removed_in: str | None = None
    renamed_to: str | None = None
    replacement: str | None = None
    added_in: str | None = None

    @property
    def failing(self) -> bool:
        """Whether the absence is a break: all but lazy and feature-gated families are."""
        return self.cls not in _NOT_FAILING


def _appears(event: str) -> str:
    """``on the first call of log_stats()`` from the catalogue's event text."""
    return f"on the {event}" if event.startswith("first ") else f"when {event}"


class EngineView:
    """One release's catalogue, the catalogued history around it, and one payload's families.

    ``upstream`` are the family names the engine's payload had (counters with ``_total`` or
    without): a family the payload has gets no note, whatever the bridge served of it.
    """

    def __init__(self, release: str, upstream: Iterable[str] = (), engine: str = "sglang") -> None:
        """Raises LookupError when ``release`` is not catalogued."""
        self.engine = engine
        self.release = release
        self.catalogue = load_catalogue(release, engine)
        self.upstream = frozenset(upstream)

    def explain(self, name: str) -> EngineNote | None:
        """The note for a family or sample name the payload lacks; None if nothing explains it.

        None too when the payload has the family (the bridge dropped or renamed it: not the
        engine's doing) and when no catalogued release defines the name.
        """
        return self._explain(name, selected=True)

    def _explain(self, name: str, *, selected: bool) -> EngineNote | None:
        """``selected``: ``name`` is what a query selects, a sample; else a family's name."""
        family = self.catalogue.find(name)
        if family is None:
            return self._removed(name) or self._newer(name)
        if self._present(family):
            return None
        if selected and name not in family.sample_names:
            return self._no_sample(name, family)
        return self._defined(family)

    def explain_sources(self, sources: Sequence[str]) -> EngineNote | None:
        """The note for a contract row served from ``sources`` that the payload left missing.

        Only the sources the payload lacks count; if every one is there, or one of them is no
        catalogued family, the release does not explain the row (None). Of several notes, one
        that fails wins: the row never appears while that family cannot.
        """
        notes = []
        for source in sources:
            if self._present_name(source):
                continue
            note = self._explain(source, selected=False)
            if note is None:
                return None
            notes.append(note)
        if not notes:
            return None
        return min(notes, key=lambda note: _PRECEDENCE.index(note.cls))

    # --- A family the release defines -------------------------------------------------------

    def _defined(self, family: EngineFamily) -> EngineNote:
        lifecycle, version = family.lifecycle, f"{self._engine_name} {self.release}"
        event, switches = lifecycle.event, tuple[str, ...]()
        if lifecycle.dead:
            cls = EngineClass.DEAD
            why = event.removeprefix("never: ") or "nothing in that release records a value"
            detail = f"{version} defines {family.name}, but it never appears: {why}"
        elif family.features:
            cls = EngineClass.FEATURE
            switches = tuple(dict.fromkeys(feature_switch(tag) for tag in family.features))
            detail = f"{family.name} needs {' and '.join(switches)} in {version}"
            if lifecycle.kind == "lazy":
                detail += f", then appears {_appears(event)}"
        elif lifecycle.kind == "lazy":
            cls = EngineClass.LAZY
            detail = (
                f"{version} creates {family.name} lazily: it appears {_appears(event)}, "
                "not yet in this payload"
            )
        else:
            cls = EngineClass.STARTUP
            detail = (
                f"{version} exports {family.name} from start-up ({family.process} process), so "
                "a scrape of that process has it: is this payload of another process or release?"
            )
        return EngineNote(
            cls, self.engine, self.release, family.name, detail, event=event, switches=switches
        )

    def _no_sample(self, name: str, family: EngineFamily) -> EngineNote:
        """``name`` is the family's, but its type has no such sample; when it last had one."""
        detail = (
            f"{self._engine_name} {self.release} defines {family.name} as a {family.type}, "
            f"which has no {name} samples (it has {', '.join(family.sample_names)})"
        )
        for version in reversed(self._versions(before=True)):
            earlier = self._load(version).get(family.name)
            if earlier is not None and name in earlier.sample_names:
                detail += f"; it was a {earlier.type} until {version}"
                break
        return EngineNote(EngineClass.NO_SAMPLE, self.engine, self.release, family.name, detail)

    # --- A family the release does not define -----------------------------------------------

    def _removed(self, name: str) -> EngineNote | None:
        """The newest older release with ``name``, the next one without it, and renames."""
        found = self._first(reversed(self._versions(before=True)), name)
        if found is None:
            return None
        last_in, family = found
        removed_in = self._after(last_in)
        detail = (
            f"{family.name} was removed in {self._engine_name} {removed_in} (last in {last_in})"
        )
        renamed, steps = self._renamed(family.name, last_in, removed_in)
        replacement = None
        if renamed is not None:
            detail += ", " + ", then ".join(f"renamed to {new} in {at}" for new, at in steps)
            replacement = _same_part(name, family, self.catalogue.get(renamed))
        return EngineNote(
            EngineClass.REMOVED,
            self.engine,
            self.release,
            family.name,
            detail,
            last_in=last_in,
            removed_in=removed_in,
            renamed_to=renamed,
            replacement=replacement,
        )

    def _renamed(
        self, name: str, last_in: str, removed_in: str
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """What ``name`` became by the asked release, following renames one release at a time.

        ``(new name, [(name, release renamed in), ...])``, or ``(None, [])`` when the catalogues
        show no rename that leads to a family of the asked release.
        """
        steps: list[tuple[str, str]] = []
        current, before, after = name, last_in, removed_in
        for _ in range(_RENAME_CHAIN):
            diff = diff_catalogues(self._load(before), self._load(after))
            new = next((r.new for r in diff.renames if r.old == current), None)
            if new is None:
                return None, []
            steps.append((new, after))
            if self.catalogue.get(new) is not None:
                return new, steps
            older = self._versions(before=True)
            later = [v for v in older if version_key(v) >= version_key(after)]
            last = next((v for v in reversed(later) if self._load(v).get(new)), None)
            if last is None:
                return None, []
            current, before, after = new, last, self._after(last)
        return None, []

    def _newer(self, name: str) -> EngineNote | None:
        found = self._first(self._versions(before=False), name)
        if found is None:
            return None
        added_in, family = found
        detail = (
            f"{family.name} is first defined in {self._engine_name} {added_in}, after "
            f"{self.release}"
        )
        return EngineNote(
            EngineClass.NEWER, self.engine, self.release, family.name, detail, added_in=added_in
        )

    # --- Lookups ----------------------------------------------------------------------------

    @property
    def _engine_name(self) -> str:
        return "SGLang" if self.engine == "sglang" else self.engine

    def _versions(self, *, before: bool) -> list[str]:
        """The catalogued releases before (or after) the asked one, oldest first."""
        key = version_key(self.release)
        versions = available_versions(self.engine)
        return [v for v in versions if (version_key(v) < key) == before and v != self.release]

    def _after(self, version: str) -> str:
        """The next catalogued release after ``version`` (at most the asked one)."""
        versions = available_versions(self.engine)
        return versions[versions.index(version) + 1]

    def _first(self, versions: Iterable[str], name: str) -> tuple[str, EngineFamily] | None:
        """The first of ``versions`` that defines ``name``, and its family there."""
        for version in versions:
            family = self._load(version).find(name)
            if family is not None:
                return version, family
        return None

    def _load(self, version: str) -> Catalogue:
        return self.catalogue if version == self.release else load_catalogue(version, self.engine)

    def _present(self, family: EngineFamily) -> bool:
        return any(n in self.upstream for n in (family.name, *family.sample_names))

    def _present_name(self, name: str) -> bool:
        if name in self.upstream:
            return True
        family = self.catalogue.find(name)
        return family is not None and self._present(family)


def _same_part(selected: str, old: EngineFamily, new: EngineFamily | None) -> str | None:
    """The sample of ``new`` that ``selected`` (a sample of ``old``) corresponds to."""
    if new is None:
        return None
    if selected in old.sample_names and old.type == new.type:
        return new.sample_names[old.sample_names.index(selected)]
    return new.name if selected == old.name else None


def explain_missing_rows(contract: ContractIndex, view: EngineView) -> dict[str, EngineNote]:
    """The contract rows left missing for want of families the release explains, by row.

    Only rows the bridge serves from community families (the contract's ``upstream`` class):
    engine, structural and pending rows are the contract's to explain.
    """
    notes: dict[str, EngineNote] = {}
    for name in contract.rows:
        status = contract.states.get(name)
        if status is not None and status.state is not RowState.MISSING:
            continue
        if contract.classify(name).cls is not MissingClass.UPSTREAM:
            continue
        sources = contract.sources(name)
        note = None if sources is None else view.explain_sources(sources)
        if note is not None:
            notes[name] = note
    return notes
