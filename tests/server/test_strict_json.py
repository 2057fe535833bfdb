"""strict_json_loads reads what json.loads reads, and refuses what JSON forbids but json.loads accepts."""

from __future__ import annotations

import json

import pytest

from fleet_rl.server.strict_json import MalformedJSON, strict_json_loads


@pytest.mark.parametrize(
    "text",
    [
        '{"task": "easy", "seed": 7, "turn_cost": 0.01, "plans": ["{}"], "final": true, "agent": null}',
        '{"plan": "caf\\u00e9 \\ud83d\\ude00"}',  # a surrogate *pair* is one valid code point
        '{"plan": "\\\\ud800"}',  # an escaped backslash, then the letters: no surrogate at all
        "[1e308, -1e308, 5e-324, 0, -0.0]",
        '"\u00e9\U0001f600"',
    ],
)
def test_valid_json_reads_as_json_loads_reads_it(text):
    assert strict_json_loads(text) == json.loads(text)
    assert strict_json_loads(text.encode("utf-8")) == json.loads(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"seed": NaN}', "NaN is not a JSON number"),
        (b'{"seed": Infinity}', "Infinity is not a JSON number"),
        (b"[-Infinity]", "-Infinity is not a JSON number"),
        (b'{"seed": 1e999}', "the number 1e999 is out of range"),
        (b'{"turn_cost": -1.5e400}', "the number -1.5e400 is out of range"),
        (b'{"task": "\\ud800"}', "lone surrogate \\ud800"),
        (b'{"plans": ["ok", "\\udfff"]}', "lone surrogate \\udfff"),
        (b'{"\\udbff": 1}', "lone surrogate \\udbff"),  # in a key
        (b'{"a": [[{"b": "x\\ud83d"}]]}', "lone surrogate \\ud83d"),  # a high half without its low half
        (b'{"task": "\xed\xa0\x80"}', "not UTF-8: byte 0xed at position 10"),  # a surrogate coded as UTF-8
        (b'{"task": "caf\xe9"}', "not UTF-8: byte 0xe9"),  # Latin-1
        (b"\xff\xfe", "not UTF-8: byte 0xff at position 0"),
        ('{"seed": 1}'.encode("utf-16"), "not UTF-8"),  # json.loads would read UTF-16
    ],
)
def test_what_json_forbids_is_refused_with_a_clear_message(data, message):
    with pytest.raises(MalformedJSON, match=message.replace("\\", "\\\\")):
        strict_json_loads(data)


def test_a_surrogate_escape_in_a_text_frame_is_refused_too():
    with pytest.raises(MalformedJSON, match="lone surrogate"):
        strict_json_loads('{"type": "step", "data": {"plan": "\\ud800"}}')


def test_syntax_errors_stay_json_decode_errors():
    for text in ("{not json", "", "[1,", '{"a": 1} extra'):
        with pytest.raises(json.JSONDecodeError):
            strict_json_loads(text)


def test_deep_nesting_is_refused_without_overflowing_the_walk():
    deep = "[" * 200 + '"\\ud800"' + "]" * 200
    with pytest.raises(MalformedJSON):
        strict_json_loads(deep)
    with pytest.raises(RecursionError):
        strict_json_loads("[" * 100_000 + "]" * 100_000)
