"""``metricbridge mm-pad-id``: the contract's pad id, exit codes and one-line errors.

The expected ids are the hand-computed ones of tests/engines/test_mm_pad_id.py (``md5sum`` and
``bc``, not this package).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from metricbridge.cli.main import main

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
IMAGE = "https://example.com/cat.png"
VIDEO = "https://example.com/clip.mp4"
PREFIX = "metricbridge mm-pad-id: "


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["mm-pad-id", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model-id", MODEL, "--url", IMAGE], 956_783_677),
        (["--model-id", MODEL, "--url", "https://example.com/猫.png"], 479_489_437),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "30"], 49_046_526),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "30.000"], 49_046_526),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "29.97"], 255_590_665),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "0.125"], 25_805_681),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", ".125"], 25_805_681),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "1.25e-1"], 25_805_681),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "2.675"], 613_376_546),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "0"], 779_998_513),
        (["--task-id", "9f86d081884c7d659a2feaa0c55ad015"], 90_837_589),
        (["--task-id", "0X9F86D081884C7D659A2FEAA0C55AD015"], 90_837_589),
        (["--task-id", "3fffffff", "--format", "text"], 1_074_741_823),
    ],
)
def test_text_prints_the_id_alone(
    argv: list[str], expected: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, *argv) == (0, f"{expected}\n", "")


def test_json_gives_the_inputs_the_digest_and_the_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "--model-id", MODEL, "--url", VIDEO, "--fps", "29.97", "--format", "json"
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "kind": "video",
        "model_id": MODEL,
        "url": VIDEO,
        "fps": 29.97,
        "hashed_text": f"{MODEL}{VIDEO}29.97",
        "md5": "4c6e5d0c5af844dce4e00dc04f2cbec9",
        "pad_id": 255_590_665,
    }


def test_json_of_an_image_has_no_fps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--model-id", MODEL, "--url", IMAGE, "--format", "json")
    report = json.loads(out)
    assert (code, report["kind"], report["fps"]) == (0, "image", None)
    assert (report["md5"], report["pad_id"]) == ("bb8c67475a0cfc758e2c96b3f8f819fd", 956_783_677)


def test_json_of_a_task_id_has_no_digest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--task-id", "0xff", "--format", "json")
    assert code == 0
    assert json.loads(out) == {"kind": "epd", "task_id": "0xff", "md5": None, "pad_id": 1_000_255}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give --model-id M --url U (and --fps F for a video), or --task-id HEX"),
        (["--task-id", "xyz"], "invalid task id 'xyz': expected hexadecimal digits, 0x first or not"),
        (["--task-id", ""], "invalid task id '': expected hexadecimal digits, 0x first or not"),
        (["--task-id=-ff"], "invalid task id '-ff': expected hexadecimal digits, 0x first or not"),
        (["--fps", "30"], "--fps needs --url"),
        (["--model-id", MODEL, "--fps", "30"], "--model-id needs --url"),
        (["--model-id", MODEL], "--model-id needs --url"),
        (["--url", IMAGE], "--url needs --model-id"),
        (["--task-id", "ff", "--url", IMAGE], "--task-id and --url are two ways to name an item: give one"),
        (["--task-id", "ff", "--fps", "30"], "--task-id and --fps are two ways to name an item: give one"),
        (["--task-id", "ff", "--model-id", MODEL, "--url", IMAGE],
         "--task-id and --model-id/--url are two ways to name an item: give one"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "-1"], "invalid --fps '-1': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps=-0"], "invalid --fps '-0': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "nan"], "invalid --fps 'nan': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "inf"], "invalid --fps 'inf': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "3_0"], "invalid --fps '3_0': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "٣٠"], "invalid --fps '٣٠': expected a number >= 0, such as 29.97"),
        (["--model-id", MODEL, "--url", VIDEO, "--fps", "1e999"], "invalid --fps '1e999': too large for a float"),
        (["--model-id", "", "--url", IMAGE], "the model id is empty"),
        (["--model-id", MODEL, "--url", ""], "the url is empty"),
        (["--model-id", MODEL, "--url", "img\udc80.png"],
         "the text to hash has no UTF-8 form: surrogates not allowed at position 30"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, *argv) == (2, "", f"{PREFIX}{message}\n")


def test_a_bad_format_is_argparse_s_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mm-pad-id", "--task-id", "ff", "--format", "yaml"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: metricbridge mm-pad-id")
    assert "metricbridge mm-pad-id: error: argument --format: invalid choice: 'yaml'" in err


def test_help_gives_the_formula(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["mm-pad-id", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1_000_000 + h % 2**30" in text
    assert 'md5(model_id + url + f"{fps:.2f}")' in text


def test_the_command_runs_as_a_process_and_imports_no_http_stack() -> None:
    """Lazily registered: the id from ``python -m metricbridge``, without aiohttp & co."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METRICBRIDGE_")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "metricbridge", "mm-pad-id", "--task-id", "ff"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "1000255\n"), done.stderr[-2000:]
    found = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.MULTILINE)
    imported = {name.split(".")[0] for name in found}
    assert "metricbridge" in imported
    assert not imported & {"aiohttp", "promql_parser", "prometheus_client", "yaml"}
