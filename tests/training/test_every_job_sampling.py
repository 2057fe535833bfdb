"""Sampling that names every job: a training answer cannot close its jobs list before every job is written."""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from fleet_rl.training.every_job_sampling import (
    EveryJobLogitsProcessor,
    EveryJobSamplingTrainer,
    closing_token_ids,
    constrained_rows,
    list_state,
    mask_written_tokens,
    row_job_ids,
    train_helpful_openings,
)
from fleet_rl.training.shared_prompt import SharedPromptTrainer
from tests.training.two_jobs import SCENARIO

EOS = 3  # a character-level tokenizer: token i is chr(i); 3 ends an answer
VOCAB = 128
ONE_JOB = '{"jobs":[{"id":"chat"}]}'  # what the scripted policy wants to write: the first job alone


class _Characters:
    def __len__(self):
        return VOCAB

    def batch_decode(self, rows, skip_special_tokens=True):
        return [
            "".join(chr(int(i)) for i in ids if not (skip_special_tokens and int(i) == EOS)) for ids in rows
        ]

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


def _closing(text: str) -> int:
    """The character that closes the innermost open string or bracket of ``text`` (EOS when none is open)."""
    stack, in_string = [], False
    for char in text:
        if in_string:
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            stack.pop()
    return ord('"') if in_string else ord(stack[-1]) if stack else EOS


def _policy_scores(texts: list[str]) -> torch.Tensor:
    """Logits of a policy that writes ``ONE_JOB`` and then ends; off its script it closes what is open."""
    scores = torch.zeros(len(texts), VOCAB)
    for row, text in enumerate(texts):
        wanted = ord(ONE_JOB[len(text)]) if ONE_JOB.startswith(text) and text != ONE_JOB else _closing(text)
        scores[row, wanted] = 10.0
    return scores


def _greedy(job_ids: list[tuple[str, ...]], processor_on: bool = True, steps: int = 80):
    """Greedy answers of the scripted policy, with the processor on or off, and the processor."""
    tokenizer = _Characters()
    processor = EveryJobLogitsProcessor(tokenizer, job_ids, [*closing_token_ids(tokenizer), EOS])
    ids = torch.full((len(job_ids), 1), ord("\n"))  # the prompt's last token
    done = [False] * len(job_ids)
    for _ in range(steps):
        texts = tokenizer.batch_decode(ids[:, 1:])
        scores = _policy_scores(texts)
        if processor_on:
            scores = processor(ids, scores)
        chosen = scores.argmax(dim=-1)
        for row in range(len(job_ids)):
            done[row] = done[row] or int(chosen[row]) == EOS
        ids = torch.cat([ids, chosen.unsqueeze(1)], dim=1)
        if all(done):
            break
    return [
        text.split(chr(EOS))[0] for text in tokenizer.batch_decode(ids[:, 1:], skip_special_tokens=False)
    ], processor


@pytest.mark.parametrize(
    "text, state",
    [
        ("no list yet", None),
        ('```json\n{"jobs": [', (0, "[")),
        ('{"jobs":[{"id":"chat","precision":{"mlp":"bf16"}', (1, "}")),
        ('{"jobs":[{"id":"chat","precision":{"mlp":"bf16"}}', (0, "}")),
        ('{"jobs":[{"id":"chat"},', (0, ",")),
        ('{"jobs":[{"id":"a]b', (1, '"')),  # a bracket inside a string is text
        ('{"jobs":[{"id":"a\\"]"}', (0, "}")),  # so is an escaped quote
        ('{"jobs":[{"id":"chat"}]}', None),  # closed
    ],
)
def test_list_state_tracks_depth_inside_the_jobs_list_outside_strings(text, state):
    assert list_state(text) == state


def test_closing_tokens_are_those_whose_text_has_a_closing_bracket():
    assert closing_token_ids(_Characters()) == (ord("]"),)


def test_row_job_ids_are_the_scenarios_and_none_for_an_agent_row():
    assert row_job_ids({"scenario": SCENARIO.to_json(), "agent": ""}) == ("chat", "tune")
    assert row_job_ids({"scenario": SCENARIO, "agent": ""}) == ("chat", "tune")
    assert row_job_ids({"scenario": SCENARIO.to_json(), "agent": "chat"}) == ()
    assert row_job_ids({"prompt": "no scenario"}) == ()


def test_a_policy_that_would_stop_after_the_first_job_writes_every_job():
    """The scripted policy closes the list after the first job; with the processor the second job's opening is
    written for it and it goes on from there: a JSON plan naming both jobs, in the scenario's order."""
    texts, processor = _greedy([("chat", "tune")])
    plan = json.loads(texts[0])
    assert [job["id"] for job in plan["jobs"]] == ["chat", "tune"]
    assert processor.forced_rows == {0}
    # the positions it wrote are exactly the second job's opening, the policy's own characters around it
    assert "".join(texts[0][position] for position in processor.written[0]) == ',{"id":"tune'
    assert processor.written[0] == list(range(texts[0].index(',{"id":"tune'), texts[0].index('tune"') + 4))


def test_rows_that_need_nothing_are_left_alone():
    """A row whose answer names every job (one job asked) and a multi-agent row (no ids) sample as without the
    processor; only the two-job row is steered."""
    with_processor, processor = _greedy([("chat",), (), ("chat", "tune")])
    without, _ = _greedy([("chat",), (), ("chat", "tune")], processor_on=False)
    assert with_processor[:2] == without[:2] == [ONE_JOB, ONE_JOB]
    assert with_processor[2] != ONE_JOB
    assert processor.forced_rows == {2}
    assert processor.written[:2] == [[], []]


def test_end_of_answer_is_forbidden_while_a_job_is_missing():
    """Between ``[`` and the first job nothing is forced, but neither ``]`` nor EOS may be sampled."""
    tokenizer = _Characters()
    processor = EveryJobLogitsProcessor(tokenizer, [("chat",)], [ord("]"), EOS])
    prompt = torch.tensor([[ord("\n")]])
    processor(prompt, torch.zeros(1, VOCAB))  # the first call fixes where the answer starts
    ids = torch.cat([prompt, torch.tensor([[ord(c) for c in '{"jobs":[']])], dim=1)
    scores = processor(ids, torch.zeros(1, VOCAB))
    assert scores[0, EOS] == -float("inf") and scores[0, ord("]")] == -float("inf")
    assert torch.isfinite(scores[0, ord("{")])


def test_written_tokens_leave_the_loss_and_stay_in_the_attention():
    completion_mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    output = {"completion_mask": completion_mask.clone()}
    share = mask_written_tokens(output, [[1, 2, 4, 9], [0], [3]], skip_rows={1})
    assert output["tool_mask"].tolist() == [[1, 0, 0, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 0, 1]]
    assert torch.equal(output["completion_mask"], completion_mask)  # attention unchanged
    assert share == pytest.approx(3 / 14)  # of the answers' tokens: row 0's position 4 is padding, 9 past it


def test_an_existing_tool_mask_keeps_its_zeros():
    output = {"completion_mask": torch.ones(1, 4, dtype=torch.long)}
    output["tool_mask"] = torch.tensor([[1, 0, 1, 1]])
    mask_written_tokens(output, [[3]])
    assert output["tool_mask"].tolist() == [[1, 0, 1, 0]]


def test_written_tokens_train_where_their_advantage_is_positive():
    """Per answer: the helped row's written tokens come back into the loss, the other's stay out; per token
    (job credit): only the written tokens whose own advantage is positive; other zeros of the mask stay."""
    tool_mask = torch.tensor([[1, 0, 0, 1], [1, 0, 0, 1]])
    written = torch.tensor([[0, 1, 1, 0], [0, 1, 1, 0]])
    mask, share = train_helpful_openings(tool_mask, written, torch.tensor([0.5, -0.5]))
    assert mask.tolist() == [[1, 1, 1, 1], [1, 0, 0, 1]] and share == pytest.approx(0.5)
    per_token = torch.tensor([[0.5, 0.2, -0.1, 0.5], [-1.0, 0.3, 0.0, -1.0]])
    mask, share = train_helpful_openings(tool_mask, written, per_token)
    assert mask.tolist() == [[1, 1, 0, 1], [1, 1, 0, 1]] and share == pytest.approx(0.5)
    tool_result = torch.tensor([[0, 1, 1, 1]])  # a zero that is no written token stays, whatever its sign
    mask, share = train_helpful_openings(tool_result, torch.zeros(1, 4, dtype=torch.long), torch.ones(1))
    assert mask.tolist() == [[0, 1, 1, 1]] and share == 0.0


def _bare_trainer(
    sample_every_job: bool,
    training: bool = True,
    share: float = 1.0,
    group_size: int = 3,
    train_opening: bool = False,
) -> EveryJobSamplingTrainer:
    """An EveryJobSamplingTrainer without a model: TRL's generation is patched to run the scripted policy
    through whatever ``generate`` the unwrapped model has at that moment."""
    trainer = object.__new__(EveryJobSamplingTrainer)
    trainer.sample_every_job, trainer.explore_edit_rate, trainer.turn_credit = sample_every_job, 0.0, False
    trainer.explore_repair_rate = 0.0
    trainer.sample_every_job_share, trainer.num_generations = share, group_size
    trainer.sample_every_job_train_opening = train_opening
    trainer._every_job_rows, trainer._every_job_written, trainer._stop_ids = None, None, None
    trainer.model = SimpleNamespace(training=training)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer.processing_class = _Characters()
    trainer.eos_token_ids = [EOS]
    trainer.model_wrapped = _ScriptedModel()
    trainer.accelerator = SimpleNamespace(unwrap_model=lambda model: model, num_processes=1, process_index=0)
    return trainer


class _ScriptedModel:
    """The unwrapped model: ``generate`` runs the scripted policy greedily through the logits processors it
    is handed, as transformers does."""

    def generate(self, rows, logits_processor=()):
        tokenizer, ids = _Characters(), torch.full((rows, 1), ord("\n"))
        for _ in range(80):
            scores = _policy_scores(tokenizer.batch_decode(ids[:, 1:]))
            for processor in logits_processor:
                scores = processor(ids, scores)
            ids = torch.cat([ids, scores.argmax(dim=-1, keepdim=True)], dim=1)
        return [
            text.split(chr(EOS))[0] for text in tokenizer.batch_decode(ids[:, 1:], skip_special_tokens=False)
        ]


@pytest.fixture
def parents(monkeypatch):
    """TRL's step: generation calls the unwrapped model's ``generate`` and scoring returns the answers."""

    def generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        return self.accelerator.unwrap_model(self.model_wrapped).generate(len(prompt_ids)), None

    def generate_and_score(self, inputs):
        answers, _ = self._generate_single_turn([[1]] * len(inputs), None, None, len(inputs))
        return {"answers": answers, "completion_mask": torch.ones(len(inputs), 80, dtype=torch.long)}

    monkeypatch.setattr(SharedPromptTrainer, "_generate_single_turn", generate_single_turn)
    monkeypatch.setattr(SharedPromptTrainer, "_generate_and_score_completions", generate_and_score)


ROWS = [{"scenario": SCENARIO.to_json(), "agent": ""}] * 2 + [
    {"scenario": SCENARIO.to_json(), "agent": "chat"}
]


def test_training_generation_names_every_job_and_logs_the_forced_share(parents):
    trainer = _bare_trainer(sample_every_job=True)
    answers = trainer._generate_and_score_completions(ROWS)["answers"]
    assert [[job["id"] for job in json.loads(answer)["jobs"]] for answer in answers] == [
        ["chat", "tune"],
        ["chat", "tune"],
        ["chat"],  # the multi-agent row writes its own part as it likes
    ]
    assert trainer._metrics["train"]["every_job/forced_share"] == [pytest.approx(2 / 3)]
    assert "generate" not in vars(trainer.model_wrapped)  # the model's own generate is back
    assert trainer._every_job_rows is None


def test_the_written_openings_carry_no_loss(parents):
    """The loss sees the policy's own tokens only: each steered row's ``tool_mask`` is 0 exactly where the
    second job's opening was written; the multi-agent row is untouched."""
    trainer = _bare_trainer(sample_every_job=True)
    output = trainer._generate_and_score_completions(ROWS)
    for row, answer in enumerate(output["answers"][:2]):
        start = answer.index(',{"id":"tune')
        written = torch.zeros(80, dtype=torch.long)
        written[start : start + len(',{"id":"tune')] = 1
        assert torch.equal(output["tool_mask"][row], 1 - written)
    assert bool(output["tool_mask"][2].all())
    assert trainer._metrics["train"]["every_job/written_share"] == [pytest.approx(2 * 12 / (3 * 80))]


@pytest.mark.parametrize("sample_every_job, training", [(False, True), (True, False)])
def test_off_or_in_evaluation_the_policy_samples_as_it_likes(parents, sample_every_job, training):
    trainer = _bare_trainer(sample_every_job, training)
    output = trainer._generate_and_score_completions(ROWS)
    assert output["answers"] == [ONE_JOB] * 3
    assert "every_job/forced_share" not in trainer._metrics["train"]
    assert "tool_mask" not in output


def test_a_share_constrains_the_first_answers_of_each_group_only():
    rows = [{"scenario": SCENARIO.to_json()}] * 8
    ids = row_job_ids(rows[0])
    assert constrained_rows(rows, 4, 0.5) == [ids, ids, (), (), ids, ids, (), ()]
    assert constrained_rows(rows[:4], 4, 0.5, first_row=2) == [(), (), ids, ids]  # a second process's rows
    assert constrained_rows(rows[:4], 4, 0.01) == [ids, (), (), ()]  # at least one a group
    assert constrained_rows(rows[:2], 2, 1.0) == [ids, ids]
    assert constrained_rows([{"scenario": SCENARIO.to_json(), "agent": "chat"}], 1, 1.0) == [()]


def test_with_a_share_the_free_answers_of_a_group_close_as_they_like(parents):
    """Groups of two, half constrained: each group's first answer names both jobs, its second closes after
    the first job as the scripted policy does; only the first carries written (masked) tokens."""
    trainer = _bare_trainer(sample_every_job=True, share=0.5, group_size=2)
    rows = [{"scenario": SCENARIO.to_json(), "agent": ""}] * 4
    output = trainer._generate_and_score_completions(rows)
    names = [[job["id"] for job in json.loads(answer)["jobs"]] for answer in output["answers"]]
    assert names == [["chat", "tune"], ["chat"], ["chat", "tune"], ["chat"]]
    assert [bool((output["tool_mask"][row] == 0).any()) for row in range(4)] == [True, False, True, False]
    assert output["answers"][1] == ONE_JOB
    assert trainer._metrics["train"]["every_job/forced_share"] == [pytest.approx(2 / 4)]


def test_trained_openings_reach_the_loss_where_the_answer_helped(parents, monkeypatch):
    """``sample_every_job_train_opening``: generation still masks the written opening and hands its positions
    on; the loss gets them back in the row whose advantage is positive only, without the extra key, and logs
    the share trained."""
    seen = []
    monkeypatch.setattr(SharedPromptTrainer, "_compute_loss", lambda self, model, inputs: seen.append(inputs))
    trainer = _bare_trainer(sample_every_job=True, train_opening=True)
    output = trainer._generate_and_score_completions(ROWS)
    assert torch.equal(output["every_job_written"], 1 - output["tool_mask"])  # the openings, masked
    output["advantages"] = torch.tensor([0.7, -0.7, 0.7])
    trainer._compute_loss(None, output)
    assert "every_job_written" not in seen[0]
    assert bool(seen[0]["tool_mask"][0].all()) and bool(seen[0]["tool_mask"][2].all())
    assert torch.equal(seen[0]["tool_mask"][1], output["tool_mask"][1])  # the worse answer's stay out
    assert trainer._metrics["train"]["every_job/opening_trained"] == [pytest.approx(0.5)]


def test_without_the_option_no_positions_ride_along(parents):
    trainer = _bare_trainer(sample_every_job=True)
    assert "every_job_written" not in trainer._generate_and_score_completions(ROWS)
