"""The sglang-legacy profile: generated from the catalogues, and every note's claim true of them.

The notes' release claims are re-derived here from the catalogue data directly, not through the
generator, so a note that names the wrong release (or a catalogue that changes under it) fails.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from metricbridge.config.load import load_config
from metricbridge.engines import available_versions, feature_switch, load_catalogue

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "src" / "metricbridge" / "data" / "profiles" / "sglang-legacy.yaml"
VERSIONS = available_versions()
FIRST = VERSIONS[0]


def _generator() -> ModuleType:
    path = ROOT / "tools" / "generate_sglang_legacy_profile.py"
    spec = importlib.util.spec_from_file_location("generate_sglang_legacy_profile", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@cache
def _profile() -> dict:
    return yaml.safe_load(PROFILE.read_text("utf-8"))


def _has(version: str, name: str) -> bool:
    return load_catalogue(version).get(name) is not None


def _first_with(name: str) -> str | None:
    return next((v for v in VERSIONS if _has(v, name)), None)


def _span(first: str, last: str) -> list[str]:
    return list(VERSIONS[VERSIONS.index(first) : VERSIONS.index(last) + 1])


def _note(name: str) -> str:
    return " ".join(_profile()["families"][name]["note"].split())


def _renamed() -> list[tuple[str, str]]:
    families = _profile()["families"]
    return [(name, rule["source"]) for name, rule in families.items() if "source" in rule]


def test_regenerating_the_profile_gives_the_shipped_file() -> None:
    """The shipped file is exactly what the generator writes from today's catalogues."""
    assert _generator().render() == PROFILE.read_text("utf-8")


def test_the_profile_loads_over_the_default_contract() -> None:
    """Layered over the shipped rules it adds its rows, clashing with none."""
    config = load_config(profiles=["sglang-legacy"])
    names = {rule.name for rule in config.families}
    assert set(_profile()["families"]) <= names
    assert {item.name for item in config.items} >= set(_profile()["items"])


@pytest.mark.parametrize("name", sorted(_profile()["families"]))
def test_no_old_name_is_a_family_of_a_catalogued_release_unless_kept(name: str) -> None:
    """A renamed, derived or engine row names a family no catalogued release defines."""
    rule = _profile()["families"][name]
    in_place = rule["disposition"] == "relabel" and "source" not in rule
    assert (_first_with(name) is not None) is in_place, name


@pytest.mark.parametrize(("old", "source"), _renamed())
def test_renamed_in_names_the_first_release_with_today_s_name(old: str, source: str) -> None:
    """'Renamed in X' is the first catalogued release with the source; 'before' the first one."""
    note = _note(old)
    first = _first_with(source)
    assert first is not None
    if first == FIRST:
        assert note.startswith(f"Renamed before {FIRST} ("), note
        return
    found = re.match(r"Renamed in (\S+) \(", note)
    assert found, note
    assert found[1] == first


@pytest.mark.parametrize(("old", "source"), _renamed())
def test_earlier_names_and_gaps_the_note_claims_are_in_the_catalogues(
    old: str, source: str
) -> None:
    """'V has it as N' and 'A to B have neither name' hold for every release they cover."""
    note = _note(old)
    names = [source]
    for version, earlier in re.findall(r"; (\S+) has it as (\S+?)[;)]", note):
        assert _has(version, earlier)
        assert not _has(version, source)
        names.append(earlier)
    for start, end in re.findall(r"; (\S+) to (\S+) have neither name", note):
        assert start == FIRST
        assert not any(_has(v, n) for v in _span(start, end) for n in names)
        after = VERSIONS[VERSIONS.index(end) + 1]
        assert any(_has(after, n) for n in names)


@pytest.mark.parametrize(("old", "source"), _renamed())
def test_today_s_family_has_the_old_type_and_the_model_label(old: str, source: str) -> None:
    """The rule's type is today's family's in the newest release, and it has model_name."""
    rule = _profile()["families"][old]
    family = load_catalogue(VERSIONS[-1]).get(source)
    assert family is not None
    assert rule["type"] == family.type
    assert "model_name" in family.labels
    assert rule["relabel"] == [{"source_labels": ["model_name"], "target_label": "name"}]


@pytest.mark.parametrize(("old", "source"), _renamed())
def test_a_switch_the_note_names_is_the_one_the_catalogues_tag(old: str, source: str) -> None:
    """'SGLang A to B records it only with FLAG': exactly those releases tag that switch."""
    note = _note(old)
    tagged = [
        (v, feature_switch(t))
        for v in VERSIONS
        if (f := load_catalogue(v).get(source))
        for t in f.features
        if feature_switch(t)
    ]
    found = re.search(r"SGLang (\S+) to (\S+) records it only with (.+?)\.$", note)
    if not tagged:
        assert found is None, note
        return
    assert found, note
    assert (found[1], found[2]) == (tagged[0][0], tagged[-1][0])
    assert found[3] == tagged[0][1]


def test_label_rename_notes_match_the_catalogued_label_sets() -> None:
    """Each in-place row: the family's first catalogued release says model_name, never name."""
    families = _profile()["families"]
    in_place = [
        n for n, r in families.items() if r["disposition"] == "relabel" and "source" not in r
    ]
    assert in_place
    for name in in_place:
        note = _note(name)
        assert note.startswith(f"Label name renamed model_name before {FIRST}"), note
        first = _first_with(name)
        assert first is not None
        family = load_catalogue(first).get(name)
        assert family is not None
        assert "model_name" in family.labels
        assert "name" not in family.labels
        claimed = re.search(r"the family is catalogued from (\S+)\.(?:\s|$)", note)
        assert (claimed[1] if claimed else FIRST) == first, note


def test_derived_and_engine_rows_say_the_old_family_went_before_the_first_release() -> None:
    """/server_info rows and engine rows: 'Removed before' the first catalogued release."""
    families = _profile()["families"]
    rows = [n for n, r in families.items() if r["disposition"] in ("derive", "engine")]
    assert {"sglang:max_prefill_tokens", "sglang:max_running_requests"} <= set(rows)
    for name in rows:
        assert _note(name).startswith(f"Removed before {FIRST}."), name
        assert _first_with(name) is None


def test_the_server_info_rows_read_the_fields_the_old_gauges_held() -> None:
    """max_prefill_tokens and max_running_requests come from /server_info, whole-engine."""
    families = _profile()["families"]
    for field in ("max_prefill_tokens", "max_running_requests"):
        derive = families[f"sglang:{field}"]["derive"]
        assert derive["op"] == "server_info"
        assert derive["numerator"] == {"server_info": field}
        assert derive["labels_from"] == "sglang:context_len"


def test_the_old_percent_hit_rate_is_an_engine_item_not_today_s_family() -> None:
    """The old cache_hit_rate (percent) is reported; today's ratio family is left untouched."""
    profile = _profile()
    assert "sglang:cache_hit_rate" not in profile["families"]
    item = profile["items"]["sglang:cache_hit_rate{name}"]
    assert item["disposition"] == "engine"
    assert "percentage" in item["note"]
    family = load_catalogue(VERSIONS[-1]).get("sglang:cache_hit_rate")
    assert family is not None
    assert family.type == "gauge"


def test_each_rule_s_comment_names_the_release_today_s_family_is_catalogued_from() -> None:
    """'# today: from S, catalogued from V' / 'same name, catalogued from V': the catalogues'."""
    comments = re.findall(
        r"# today: (?:from (\S+)|same name), catalogued from ([^,\s]+)[^\n]*\n  (\S+?)(?:\{name\})?:\n",
        PROFILE.read_text("utf-8"),
    )
    assert len(comments) == len(_renamed()) + 5  # four in-place rows and the engine item
    for source, version, old in comments:
        assert _first_with(source or old) == version, old
