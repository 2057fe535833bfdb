"""The jobs list's end credited like a job: which objects are extra, which tokens chose, the term."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fleet_rl.training.job_credit import token_char_ends
from fleet_rl.training.job_spans import id_objects
from fleet_rl.training.list_end_credit import (
    LIST_END,
    add_list_end_credit,
    extra_objects,
    list_end_credit,
    overshoot_tokens,
)

ANSWER = '{"jobs": [{"id": "a", "precision": {"mlp": "fp8"}}, {"id": "x\\"y"}, {"id": "b"}, {"id": "a"}]}'


def _characters(text: str) -> list[int]:  # a character-level tokenizer: each character one token
    return token_char_ends(lambda ids: text[: len(ids)], list(range(len(text))))


def test_id_objects_lists_every_job_object_in_text_order_with_its_escaped_id():
    objects = id_objects(ANSWER)
    assert [job_id for job_id, _ in objects] == ["a", 'x"y', "b", "a"]
    assert ANSWER[slice(*objects[0][1])] == '{"id": "a", "precision": {"mlp": "fp8"}}'  # the innermost
    assert id_objects('"id": "a" {') == []  # not inside an object
    assert id_objects('{"id": "bad\\q"}') == []  # an escape JSON does not know


@given(st.text(max_size=200))
def test_id_objects_never_raise_and_lie_in_the_text(text):
    for _, (start, end) in id_objects(text):
        assert 0 <= start < end <= len(text) and text[start] == "{" and text[end - 1] == "}"


def test_an_object_is_extra_when_its_id_is_not_the_scenarios_or_comes_again():
    objects = id_objects(ANSWER)
    assert extra_objects(objects, ["a", "b"]) == [1, 3]  # invented, then repeated
    assert extra_objects(objects, ["a", "b", 'x"y']) == [3]
    assert extra_objects(objects[:3], ["a", "b", 'x"y']) == []


def test_overshoot_tokens_run_from_the_previous_objects_brace_through_the_extra_object():
    objects = id_objects(ANSWER)
    ends = _characters(ANSWER)
    previous_brace = objects[2][1][1] - 1
    assert overshoot_tokens(objects, [3], ends) == tuple(range(previous_brace, objects[3][1][1]))
    both = overshoot_tokens(objects, [1, 3], ends)  # one run per extra object, each token once
    assert both == (*range(objects[0][1][1] - 1, objects[1][1][1]), *range(previous_brace, objects[3][1][1]))
    first = overshoot_tokens(objects, [0], ends)  # the answer's first object: from its own first character
    assert first == tuple(range(objects[0][1][0], objects[0][1][1]))
    cut = overshoot_tokens(objects, [3], ends[: objects[3][1][0] + 2])  # the object runs past the tokens
    assert cut == tuple(range(previous_brace, objects[3][1][0] + 2))
    assert overshoot_tokens(objects, [3], ends[:previous_brace]) == ()  # its opening lies past the tokens


def test_the_end_credit_is_one_for_every_job_once_else_the_given_values():
    assert list_end_credit(True, [], [], 0.0, 0.2) == 1.0
    assert list_end_credit(True, ["b"], [], 0.1, 0.2) == 0.1
    assert list_end_credit(False, [], [3], 0.1, 0.2) == 0.2
    assert list_end_credit(False, [], [], 0.1, 0.2) is None  # no plan, a rejected plan, another IRD rule


def test_the_end_term_goes_on_each_rows_tokens_against_its_groups_mean():
    advantages = torch.zeros(4, 3)
    means = [{LIST_END: 0.5}, {LIST_END: 0.5}, {}, {LIST_END: 0.5}]
    add_list_end_credit(advantages, [(1, 2), (0, 9), (0,), ()], [1.0, 0.0, 1.0, None], means, 0.5)
    expected = torch.tensor([[0.0, 0.25, 0.25], [-0.25, 0.0, 0.0], [0.0] * 3, [0.0] * 3])
    assert torch.allclose(advantages, expected)  # past the answer: nothing; no group mean: nothing
    with pytest.raises(ValueError):
        add_list_end_credit(advantages, [()], [1.0, 1.0], means[:2], 0.5)
