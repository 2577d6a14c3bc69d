"""The contract's multimodal pad id against values computed by hand, outside this package.

Each md5 literal below is ``printf '%s' TEXT | md5sum`` (the shell's UTF-8 bytes), and each id
``1000000 + h % (2^30)`` in ``bc`` from that hex digest: neither goes through hashlib or Python's
int(), so a slip in the module cannot agree with its own test.
"""

from __future__ import annotations

import math

import pytest

from metricbridge.engines.mm_pad_id import (
    FPS_FORMAT,
    MM_PAD_SHIFT_VALUE,
    PAD_ID_MAX,
    PAD_ID_MIN,
    PAD_MODULUS,
    hashed_text,
    md5_hex,
    pad_id,
    pad_id_from_hash,
    pad_id_from_task_id,
    task_id_value,
)

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
IMAGE = "https://example.com/cat.png"
VIDEO = "https://example.com/clip.mp4"

# (url, fps, the text hashed, its md5 hex digest, the pad id), all computed by hand.
CASES = [
    (IMAGE, None, f"{MODEL}{IMAGE}", "bb8c67475a0cfc758e2c96b3f8f819fd", 956_783_677),
    ("https://example.com/猫.png", None, f"{MODEL}https://example.com/猫.png",
     "b0cacac505c5d416a8fffb629c852b5d", 479_489_437),
    (VIDEO, 30, f"{MODEL}{VIDEO}30.00", "5cf89c792aef2e00e9816cca02dd21be", 49_046_526),
    (VIDEO, 30.0, f"{MODEL}{VIDEO}30.00", "5cf89c792aef2e00e9816cca02dd21be", 49_046_526),
    (VIDEO, 29.97, f"{MODEL}{VIDEO}29.97", "4c6e5d0c5af844dce4e00dc04f2cbec9", 255_590_665),
    # 0.125 is exact in binary, a tie: rounded to even, "0.12", not "0.13".
    (VIDEO, 0.125, f"{MODEL}{VIDEO}0.12", "924e46ab9b7037dc272c70f6c17a8131", 25_805_681),
    # 2.675 is 2.67499999... in binary: "2.67", not the "2.68" decimal rounding would give.
    (VIDEO, 2.675, f"{MODEL}{VIDEO}2.67", "fc56967b79561e9907fdfc7364801fe2", 613_376_546),
    (VIDEO, 0.0, f"{MODEL}{VIDEO}0.00", "37b72ed716a8d1fb4f4bee716e6e92f1", 779_998_513),
]  # fmt: skip


def test_the_constants_are_the_contract_s() -> None:
    assert MM_PAD_SHIFT_VALUE == 1_000_000
    assert PAD_MODULUS == 2**30 == 1_073_741_824
    assert (PAD_ID_MIN, PAD_ID_MAX) == (1_000_000, 1_074_741_823)
    assert FPS_FORMAT == ".2f"


@pytest.mark.parametrize(("url", "fps", "text", "digest", "expected"), CASES)
def test_pad_ids_match_the_hand_computed_ones(
    url: str, fps: float | None, text: str, digest: str, expected: int
) -> None:
    assert hashed_text(MODEL, url, fps=fps) == text
    assert md5_hex(MODEL, url, fps=fps) == digest
    assert pad_id(MODEL, url, fps=fps) == expected
    assert PAD_ID_MIN <= expected <= PAD_ID_MAX


def test_the_whole_digest_is_read_big_endian_not_its_first_bytes() -> None:
    """Only the digest's last 30 bits count; the first 8 bytes would give another id."""
    assert pad_id(MODEL, IMAGE) == 1_000_000 + (0xF8F819FD & (2**30 - 1)) == 956_783_677
    first_eight_bytes = 1_000_000 + 0xBB8C67475A0CFC75 % 2**30
    assert first_eight_bytes == 438_058_677 != pad_id(MODEL, IMAGE)


def test_a_video_differs_from_the_same_url_as_an_image() -> None:
    assert pad_id(MODEL, VIDEO) != pad_id(MODEL, VIDEO, fps=30)


def test_the_two_strings_are_concatenated_without_a_separator() -> None:
    """The contract's `model_id + url`: moving a character across the seam keeps the id."""
    assert hashed_text("ab", "c") == hashed_text("a", "bc") == "abc"
    assert pad_id("ab", "c") == pad_id("a", "bc")


def test_no_normalisation_of_the_url() -> None:
    assert pad_id(MODEL, IMAGE) != pad_id(MODEL, IMAGE.upper())
    assert pad_id(MODEL, IMAGE) != pad_id(MODEL, f" {IMAGE}")


@pytest.mark.parametrize(
    ("task_id", "expected"),
    [
        ("9f86d081884c7d659a2feaa0c55ad015", 90_837_589),
        ("9F86D081884C7D659A2FEAA0C55AD015", 90_837_589),
        ("0x9f86d081884c7d659a2feaa0c55ad015", 90_837_589),
        ("0X9F86D081884C7D659A2FEAA0C55AD015", 90_837_589),
        ("ff", 1_000_255),
        ("0", 1_000_000),
        ("40000000", 1_000_000),  # 2**30 wraps to the first id
        ("3fffffff", 1_074_741_823),  # 2**30 - 1: the last one
        ("000000ff", 1_000_255),
    ],
)
def test_task_ids_are_read_as_hexadecimal_without_md5(task_id: str, expected: int) -> None:
    assert pad_id_from_task_id(task_id) == expected


@pytest.mark.parametrize(
    "task_id",
    ["", "0x", "xyz", "-ff", "+ff", " ff", "ff\n", "f_f", "0x0xff", "ab-cd", "\uff46\uff46", "٣"],
)
def test_what_is_not_a_hexadecimal_task_id_is_refused(task_id: str) -> None:
    with pytest.raises(ValueError, match=r"invalid task id .*: expected hexadecimal digits"):
        pad_id_from_task_id(task_id)


def test_task_id_value_is_the_integer() -> None:
    assert task_id_value("0xff") == 255
    assert task_id_value("DeadBeef") == 0xDEADBEEF


@pytest.mark.parametrize("fps", [-1.0, -0.001, -0.0, math.nan, math.inf, -math.inf])
def test_an_fps_that_is_negative_or_not_finite_is_refused(fps: float) -> None:
    with pytest.raises(ValueError, match=r"invalid fps .*: expected a finite number >= 0"):
        pad_id(MODEL, VIDEO, fps=fps)


@pytest.mark.parametrize(
    ("model_id", "url", "message"),
    [("", IMAGE, "the model id is empty"), (MODEL, "", "the url is empty")],
)
def test_empty_inputs_are_refused(model_id: str, url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pad_id(model_id, url)


def test_text_without_a_utf8_form_is_refused() -> None:
    with pytest.raises(ValueError, match="no UTF-8 form: surrogates not allowed at position 30"):
        pad_id(MODEL, "img\udc80.png")


def test_a_negative_hash_is_refused() -> None:
    assert pad_id_from_hash(2**128 - 1) == 1_074_741_823
    with pytest.raises(ValueError, match="invalid hash -1"):
        pad_id_from_hash(-1)
