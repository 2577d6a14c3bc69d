"""Profiles: shipped rules fragments layered over a rules file, never overriding a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from metricbridge.cli.main import main
from metricbridge.config import load
from metricbridge.config.load import load_config, parse_config, shipped_profiles
from metricbridge.errors import ConfigError, UnknownProfileError

BASE = """version: 1
families:
  sglang:x:
    disposition: engine
"""
EXTRA = """version: 1
description: adds x again
families:
  sglang:y:
    disposition: engine
  sglang:x:
    disposition: engine
"""


def test_the_shipped_profile_is_listed_with_its_description() -> None:
    assert list(shipped_profiles()) == ["approximations", "sglang-legacy"]
    assert shipped_profiles()["approximations"].startswith("serve the approximate rows")
    assert shipped_profiles()["sglang-legacy"].startswith("serve SGLang's names from before")


def test_profiles_in_the_file_and_from_the_caller_are_layered() -> None:
    plain = load_config()
    assert plain.profiles == ()
    assert not plain.approximate
    on = parse_config(BASE + "profiles: [approximations]\n", "inline")
    assert on.profiles == ("approximations",)
    assert on.approximate
    assert load_config(profiles=["approximations"]).approximate


def test_unknown_profile_is_one_issue_listing_the_shipped_ones() -> None:
    with pytest.raises(UnknownProfileError) as caught:
        load_config(profiles=["nope"])
    assert [str(i) for i in caught.value.issues] == [
        "--profile: unknown profile 'nope' (shipped profiles: approximations, sglang-legacy)"
    ]
    with pytest.raises(ConfigError) as in_file:
        parse_config(BASE + "profiles: [nope]\n", "inline")
    assert str(in_file.value.issues[0]) == (
        "inline:5: profiles: unknown profile 'nope' (shipped profiles: approximations, sglang-legacy)"
    )


def test_a_family_both_define_names_both_files_and_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(EXTRA)
    monkeypatch.setattr(load, "_profile_files", lambda: {"extra": extra})
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE, "rules.yaml", ["extra"])
    assert [str(i) for i in caught.value.issues] == [
        (
            "<profile extra.yaml>:6: families.sglang:x: also defined at rules.yaml:3; a profile "
            "adds families, it never overrides one (remove the row from one of the two files)"
        )
    ]
    config = parse_config(BASE.replace("sglang:x", "sglang:z"), "rules.yaml", ["extra"])
    assert [rule.name for rule in config.families] == ["sglang:z", "sglang:y", "sglang:x"]
    assert config.families[1].origin == "<profile extra.yaml>"


def test_an_approximation_must_say_so_in_its_help() -> None:
    text = (
        BASE
        + """  sglang:a:
    disposition: approximate
    type: gauge
    help: mean of something
    derive:
      op: ratio_of_deltas
      numerator: {family: sglang:n_total, exclude: {k: [a, b]}}
      denominator: {family: sglang:h, sample: count}
"""
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "inline")
    assert [i.message for i in caught.value.issues] == [
        "an approximation's HELP starts with 'Approximation:' and says what it is"
    ]


def test_cli_profiles_and_unknown_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    assert capsys.readouterr().out.startswith("approximations  serve the approximate rows")
    assert main(["profiles", "--format", "json"]) == 0
    assert '"name": "approximations"' in capsys.readouterr().out
    assert main(["config", "check", "--profile", "approximations"]) == 0
    assert main(["config", "check", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "--profile: unknown profile 'nope' (shipped profiles: approximations, sglang-legacy)\n"
    )
