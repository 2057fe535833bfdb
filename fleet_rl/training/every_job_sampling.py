"""Sampling that names every job (``sample_every_job: true``): no training answer closes its jobs list early.

On the SmolLM2 presets the warm-started policy, sampled at temperature 0.8, closes the jobs list after the
first job in about half of its answers to two- and three-job prompts (greedily it writes every job), and
the tiers pay a left-out job its idle credit, above a job that is placed and fails: the one-job answers
earn more, GRPO reinforces them, and the trained policy places 0.73 of the jobs against its start's 0.97
(issue #43, ``placed_job_share``). Leaving a job idle is an honest answer and the tiers stay as they are;
what this option removes is the *accident*: a sampled ``]`` that ends the list before the policy has
written a job at all.

``EveryJobSamplingTrainer`` adds a logits processor to training's generation. For each whole-plan row
(multi-agent rows ask for one job and are left alone), once the answer has opened its ``"jobs"`` list and
while an id of the row's scenario is not yet written in it (``"<id>"``):

- every token whose text contains ``]`` and every end-of-sequence token get probability 0;
- where a job object has just closed (or a ``,`` follows one), the next missing job's opening,
  ``,{"id":"<id>``, is written token by token, and the policy goes on from there (it closes the id's
  string itself, with the merged token it learnt; it may still give the job ``"gpus": 0``). Forbidding
  ``]`` alone left SmolLM2's warm start writing keys into the list: most such answers did not parse.

Once every id is written, sampling is the policy's own. Evaluation never uses it: held-out answers are
the policy's unconstrained greedy answers.

With ``sample_every_job_share: s`` below 1 only the first ``round(s × num_generations)`` answers of each
group (at least one) are constrained and the rest sample freely (``constrained_rows``), so an answer that
closes the list early and one that names every job meet in one group and the loss compares them; with
``omitted_job_credit`` (``fleet_rl/training/job_credit.py``) the free answers' early ``]`` is trained
against the jobs the constrained ones placed.

The tokens it writes are not the policy's: they carry no loss (``tool_mask`` 0, as a revision episode's
verdicts), so the policy learns only from its own tokens of these answers. Training them with their
answer's advantage was measured to break the format (issue #43: the steered answers mostly scored below
their group, the written ``,`` was pushed down, and one seed learnt to end its answers after the first job
object without ``]}``). The tokens it only forbids (``]``, end of sequence) leave the policy's choice among
the rest, which the loss weighs by the policy's own log-probability, as for answers edited by
``explore_edit_rate``. An answer that ``explore_edit_rate`` edited after sampling is the editor's, not the
processor's: its tokens are re-encoded, and nothing in it is masked. Transformers generation only (vLLM
samples outside this process; ``fleet_rl/training/checks.py`` refuses it) and ``episode_mode: single``
only. Logged per step: ``every_job/forced_share``, the share of the step's answers in which the policy's
most likely token, where the processor stepped in, was one it forbids (it would most likely have closed
the list or ended the answer), and ``every_job/written_share``, the share of the answers' tokens it wrote.

With ``sample_every_job_train_opening: true`` a written token carries loss where its advantage (the plan's,
plus its job's with ``job_credit``) is positive: the opening of a job the policy would have left out is
trained up in the answers where naming that job helped, and never trained down, so the policy learns the
next job's ``,{"id":"`` as the alternative to ``]`` (issue #43: with half of each group steered and the
openings masked, one seed pushed its early ``]`` down and wrote a key in its place, an answer that does not
parse). The decision is taken in the loss (``_compute_loss``), where the advantages are final; the
positions travel as ``every_job_written`` beside TRL's tensors. ``every_job/opening_trained`` logs the share
of written tokens so trained. Measured on SmolLM2 it made things worse (issue #43, +0.9 against +4.5 without
it): the opening starts with a lone ``,`` after the policy's ``"}`` (SmolLM2 writes ``"},`` then ``{"``),
and training that ``,`` up raised the key path ``,"kv_cache"`` as much as the job's. Not recommended.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from fleet_rl.scenario import Scenario
from fleet_rl.training.edit_exploration import EditExplorationTrainer

__all__ = [
    "EveryJobLogitsProcessor",
    "EveryJobSamplingTrainer",
    "closing_token_ids",
    "constrained_rows",
    "list_state",
    "mask_written_tokens",
    "row_job_ids",
    "train_helpful_openings",
    "written_positions",
]


def closing_token_ids(tokenizer) -> tuple[int, ...]:
    """Every token id of ``tokenizer`` whose text contains ``]`` (one decode of the vocabulary, ~0.1 s for
    SmolLM2's 49k tokens; the trainer keeps the answer)."""
    texts = tokenizer.batch_decode([[token] for token in range(len(tokenizer))])
    return tuple(token for token, text in enumerate(texts) if "]" in text)


def row_job_ids(row: dict) -> tuple[str, ...]:
    """The job ids a training row's answer must name: its scenario's, in order; none for a multi-agent row
    (it asks for its own job's part) or a row without a scenario."""
    if row.get("agent") or not row.get("scenario"):
        return ()
    scenario = row["scenario"]
    if not isinstance(scenario, Scenario):
        scenario = Scenario.from_json(scenario)
    return tuple(job.id for job in scenario.jobs)


def constrained_rows(
    inputs: Sequence[dict], group_size: int, share: float, first_row: int = 0
) -> list[tuple[str, ...]]:
    """Per row, the job ids the processor makes it name (``row_job_ids``), or none: rows are GRPO's
    consecutive groups of ``group_size`` (``first_row``: this process's first row among all processes'),
    and the first ``round(share × group_size)`` rows of each group, at least one, are constrained."""
    per_group = max(1, round(share * group_size))
    return [
        row_job_ids(row) if (first_row + index) % group_size < per_group else ()
        for index, row in enumerate(inputs)
    ]


def list_state(text: str) -> tuple[int, str] | None:
    """Where ``text`` stands in its ``"jobs"`` list: ``(depth, last)``, the bracket depth inside the list (0:
    between jobs) and its last character outside strings and whitespace; ``None`` before the list opens or
    after it closes."""
    key = text.find('"jobs"')
    opening = text.find("[", key) if key >= 0 else -1
    if opening < 0:
        return None
    depth, last, in_string, escaped = 0, "[", False, False
    for char in text[opening + 1 :]:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
            if not in_string:
                last = '"'
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth < 0:
                return None
        if not char.isspace():
            last = char
    return (depth, last) if not in_string else (depth, '"')


class EveryJobLogitsProcessor(LogitsProcessor):
    """Keeps row ``i``'s answer from closing its ``"jobs"`` list before it names every id of ``job_ids[i]``
    (module docstring): while one is missing, ``stop_ids`` (tokens with ``]``, end of sequence) are
    forbidden, and where a job object has just closed (or a ``,`` follows one), the next missing job's
    opening is written token by token; ``written[i]`` lists the answer positions (0: its first token) it
    wrote in row ``i``. The answer counts from the length of the first ``input_ids`` it sees: generation
    starts from the prompt, or from its last token when the prompt's cache is shared."""

    def __init__(self, tokenizer, job_ids: Sequence[Sequence[str]], stop_ids: Sequence[int]) -> None:
        self.tokenizer = tokenizer
        self.job_ids = [tuple(ids) for ids in job_ids]
        self.stop_set = set(stop_ids)
        self.stop_ids = torch.tensor(sorted(self.stop_set), dtype=torch.long)
        self.start: int | None = None
        self.queues: list[list[int]] = [[] for _ in self.job_ids]
        self.forced_rows: set[int] = set()  # rows whose most likely token would have closed the list early
        self.written: list[list[int]] = [[] for _ in self.job_ids]  # per row, answer positions it wrote
        self.complete: set[int] = set()  # rows whose answer names every id: not decoded again

    def missing_job(self, text: str, row: int) -> str | None:
        """The first of ``row``'s job ids that ``text`` does not name (``"<id>"``), once it has opened its
        jobs list; ``None`` when none is missing or the list has not opened."""
        if '"jobs"' not in text:
            return None
        return next((job_id for job_id in self.job_ids[row] if f'"{job_id}"' not in text), None)

    def _opening(self, text: str, job_id: str) -> list[int]:
        """The tokens of the next job's opening where ``text`` stands between two jobs; none elsewhere."""
        state = list_state(text)
        if state is None or state[0] != 0 or state[1] not in "},":
            return []
        prefix = "," if state[1] == "}" else ""
        # up to the id's last character: the policy closes the string itself, with the merged token it has
        # learnt (SmolLM2 writes `","` as one token; a forced `",` left it writing `gpus":` unquoted)
        return self.tokenizer.encode(f'{prefix}{{"id":"{job_id}', add_special_tokens=False)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.start is None:
            self.start = input_ids.size(1)
        if input_ids.size(0) != len(self.job_ids):
            return scores  # not the batch this processor was built for: leave it alone
        rows = [row for row, ids in enumerate(self.job_ids) if ids and row not in self.complete]
        if not rows:
            return scores
        texts = self.tokenizer.batch_decode(input_ids[rows, self.start :], skip_special_tokens=True)
        stop_ids = self.stop_ids.to(scores.device)
        for row, text in zip(rows, texts, strict=True):
            if not self.queues[row]:
                job_id = self.missing_job(text, row)
                if job_id is None:
                    if '"jobs"' in text:  # every id written: the answer only grows, so for good
                        self.complete.add(row)
                    continue
                if int(scores[row].argmax()) in self.stop_set:
                    self.forced_rows.add(row)
                self.queues[row] = self._opening(text, job_id)
            if self.queues[row]:
                token = self.queues[row].pop(0)
                self.written[row].append(input_ids.size(1) - self.start)
                scores[row] = -float("inf")
                scores[row, token] = 0.0  # finite whatever a warper did to it before: sampled for sure
            else:
                scores[row, stop_ids] = -float("inf")
        return scores


def written_positions(
    completion_mask: torch.Tensor, written: Sequence[Sequence[int]], skip_rows: Collection[int] = ()
) -> torch.Tensor:
    """A 0/1 tensor shaped as ``completion_mask``: 1 at row ``i``'s positions ``written[i]`` within its
    width, none in ``skip_rows``."""
    positions = torch.zeros_like(completion_mask)
    for row, kept in enumerate(written):
        kept = [position for position in kept if position < positions.size(1)]
        if row not in skip_rows and kept:
            positions[row, torch.tensor(kept, dtype=torch.long, device=positions.device)] = 1
    return positions


def mask_written_tokens(
    output: dict, written: Sequence[Sequence[int]], skip_rows: Collection[int] = ()
) -> float:
    """Takes the processor's written tokens out of ``output``'s loss: ``tool_mask`` (TRL's loss multiplies it
    into ``completion_mask``; created as ones where absent) gets 0 at row ``i``'s positions ``written[i]``,
    except in ``skip_rows``. ``completion_mask`` is left alone: it is also the answers' attention mask.
    Returns the share of the answers' tokens masked."""
    completion_mask = output["completion_mask"]
    tool_mask = output.get("tool_mask")
    if tool_mask is None:
        tool_mask = torch.ones_like(completion_mask)
    positions = written_positions(completion_mask, written, skip_rows)
    output["tool_mask"] = tool_mask * (1 - positions)
    return int((positions * completion_mask).sum()) / max(1, int(completion_mask.sum()))


def train_helpful_openings(
    tool_mask: torch.Tensor, written: torch.Tensor, advantages: torch.Tensor
) -> tuple[torch.Tensor, float]:
    """``tool_mask`` with 1 again at the written positions (``written`` 1) whose advantage is positive
    (``advantages``: (rows,) per answer or (rows, length) per token), and the share of written positions
    so unmasked (0 when none was written)."""
    per_token = advantages if advantages.dim() == 2 else advantages.reshape(-1, 1).expand_as(written)
    helped = written.bool() & (per_token.to(written.device) > 0)
    total = int(written.sum())
    share = int(helped.sum()) / total if total else 0.0
    return torch.where(helped, torch.ones_like(tool_mask), tool_mask), share


@contextmanager
def _generate_with(model, processor: LogitsProcessor) -> Iterator[None]:
    """``model.generate`` with ``processor`` added to its logits processors, for the duration."""
    original = model.generate
    model.generate = functools.partial(original, logits_processor=LogitsProcessorList([processor]))
    try:
        yield
    finally:
        del model.generate


class EveryJobSamplingTrainer(EditExplorationTrainer):
    """``EditExplorationTrainer`` that, with ``sample_every_job=True``, samples training answers that name
    every job before closing the jobs list (module docstring); ``False`` is its parent."""

    def __init__(
        self,
        *args,
        sample_every_job: bool = False,
        sample_every_job_share: float = 1.0,
        sample_every_job_train_opening: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sample_every_job = sample_every_job
        self.sample_every_job_share = sample_every_job_share
        self.sample_every_job_train_opening = sample_every_job_train_opening
        self._every_job_rows: list[tuple[str, ...]] | None = None
        self._every_job_written: list[list[int]] | None = None  # the last generation's written positions
        self._stop_ids: list[int] | None = None

    def _generate_and_score_completions(self, inputs):
        if not self.sample_every_job or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        first_row = self.accelerator.process_index * len(inputs)
        self._every_job_rows = constrained_rows(
            inputs, self.num_generations, self.sample_every_job_share, first_row
        )
        self._every_job_written = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._every_job_rows = None
        if self._every_job_written is not None:
            edited = set(getattr(self, "_edited_rows", ()))  # re-encoded by the editor: not the processor's
            share = mask_written_tokens(output, self._every_job_written, edited)
            self._metrics["train"]["every_job/written_share"].append(share)
            if self.sample_every_job_train_opening:  # decided in the loss, once the advantages are final
                written = written_positions(output["completion_mask"], self._every_job_written, edited)
                output["every_job_written"] = written * output["completion_mask"]
        return output

    def _compute_loss(self, model, inputs):
        written = inputs.get("every_job_written")
        if written is None:
            return super()._compute_loss(model, inputs)
        tool_mask, share = train_helpful_openings(inputs["tool_mask"], written, inputs["advantages"])
        if int(written.sum()):
            self._metrics["train"]["every_job/opening_trained"].append(share)
        inputs = {key: value for key, value in inputs.items() if key != "every_job_written"}
        return super()._compute_loss(model, inputs | {"tool_mask": tool_mask})

    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        rows = self._every_job_rows
        if rows is None or len(rows) != len(prompt_ids) or not any(rows):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        if self._stop_ids is None:  # the vocabulary does not change during a run: decoded once
            self._stop_ids = [*closing_token_ids(tokenizer), *self.eos_token_ids]
        stop_ids = self._stop_ids
        processor = EveryJobLogitsProcessor(tokenizer, rows, stop_ids)
        with _generate_with(self.accelerator.unwrap_model(self.model_wrapped), processor):
            output = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._metrics["train"]["every_job/forced_share"].append(len(processor.forced_rows) / len(rows))
        self._every_job_written = processor.written
        return output
