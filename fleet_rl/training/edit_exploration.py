"""Exploration by edits (``explore_edit_rate: p``): a share of the sampled answers get one random edit; and
by repairs (``explore_repair_rate: q``): a share get their failing jobs repaired from the kernel's verdict.

Once GRPO's samples of a prompt all agree, every answer gets advantage 0 and the step teaches nothing; on
the SmolLM2 presets that happens within ~20 steps, on a template that the choices needed to leave it
(another tensor parallelism, another format, a job left out) are never sampled again (issue #43).
``EditExplorationTrainer`` replaces each sampled answer, with probability ``p``, by a copy with one random
change to one job (``fleet_rl/training/plan_edits.py``: a tensor parallelism, a format, an added job). The
edited answers are scored and grouped like the others, so an edit that the kernel rewards above its group
gets a positive advantage and the policy is pushed towards it, one that breaks the plan a negative one.

It is off-policy on the edited tokens: TRL's loss weighs each token by its advantage through the policy's
log-probability of it, whoever wrote it, so an edit the policy would rarely sample still trains it (as
when an off-policy answer joins a group; no importance weight, which would all but erase such an edit).
Where edits help, the policy learns them; where they do not, they cost the share of samples they take.

Random edits seldom hit the job that failed with a setting that holds it. With ``explore_repair_rate: q``
another share ``q`` of the answers (drawn apart from the edited share: one draw per row, ``q`` first) gets
``fleet_rl/training/plan_repairs.py``'s repair instead: each job the kernel's verdict marks out of memory,
unsupported, unstable or invalid takes one of its prompt's ``Fits`` settings. Answers whose jobs all ran are
left as sampled. ``repairs/share`` and ``repairs/advantage`` log them as the ``edits/`` metrics do edits.
With ``explore_repair_place_omitted: true`` the repairs also place the jobs an answer leaves out (one
replica at a ``Fits`` setting, as expert iteration's repairs do): on medium scenarios the policy's answers
mostly name the first job alone, and a repair of the crash alone leaves the plan failing on the idle jobs.
With ``explore_repair_too_slow: true`` a job under its throughput floor is repaired as a crashed one is, and
with ``explore_repair_draws: n`` each repaired answer is the best of ``n`` repairs by ``fleet_reward``
(``plan_repairs.best_repair``): the kernel picks which of the settings that fit the policy is shown.

Only whole answers that ended (EOS) and whose plan parses are edited, on whole-plan rows (multi-agent rows
ask for one job and are left alone), in training (evaluation stays the policy's own answers), and with
TRL's transformers generation (vLLM's sampling log-probabilities would no longer match the tokens;
``fleet_rl/training/checks.py`` refuses the combination). Which rows are edited and how is drawn from the
run's seed, the step and the row, so a resumed run draws the same. ``edits/share`` logs the share of
answers edited and ``edits/advantage`` the mean advantage of the edited ones (above 0: edits beat the
policy's own answers).
"""

from __future__ import annotations

import random

from fleet_rl.training.plan_edits import edit_answer
from fleet_rl.training.plan_repairs import best_repair
from fleet_rl.training.turn_credit import TurnCreditTrainer
from rewards import fleet_reward

__all__ = ["EditExplorationTrainer"]


class EditExplorationTrainer(TurnCreditTrainer):
    """``TurnCreditTrainer`` that, with ``explore_edit_rate > 0``, edits that share of the training answers,
    and with ``explore_repair_rate > 0`` repairs that share, placing the jobs an answer leaves out too with
    ``explore_repair_place_omitted``, the jobs under their floors too with ``explore_repair_too_slow``, the
    best of ``explore_repair_draws`` repairs (module docstring); both rates 0 is its parent."""

    def __init__(
        self,
        *args,
        explore_edit_rate: float = 0.0,
        explore_repair_rate: float = 0.0,
        explore_repair_place_omitted: bool = False,
        explore_repair_too_slow: bool = False,
        explore_repair_draws: int = 1,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        if explore_repair_draws < 1:
            raise ValueError(f"explore_repair_draws must be at least 1, got {explore_repair_draws}")
        self.explore_edit_rate, self.explore_repair_rate = explore_edit_rate, explore_repair_rate
        self.explore_repair_place_omitted = explore_repair_place_omitted
        self.explore_repair_too_slow, self.explore_repair_draws = (
            explore_repair_too_slow,
            explore_repair_draws,
        )
        self._edit_inputs: list[dict] | None = None
        self._edited_rows: list[int] = []  # every row rewritten (edited or repaired)
        self._repaired_rows: list[int] = []
        self._draw = (-1, 0)  # (global step, generations drawn in it): resampled groups draw anew

    def _generate_and_score_completions(self, inputs):
        if not (self.explore_edit_rate or self.explore_repair_rate) or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        self._edit_inputs, self._edited_rows, self._repaired_rows = inputs, [], []
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._edit_inputs = None
        advantages = output["advantages"].reshape(len(inputs), -1)[:, 0]
        repaired = set(self._repaired_rows)
        for name, rate, rows in (
            ("edits", self.explore_edit_rate, [row for row in self._edited_rows if row not in repaired]),
            ("repairs", self.explore_repair_rate, self._repaired_rows),
        ):
            if not rate:
                continue
            self._metrics["train"][f"{name}/share"].append(len(rows) / max(1, len(inputs)))
            if rows:
                values = [float(advantages[row]) for row in rows]
                self._metrics["train"][f"{name}/advantage"].append(sum(values) / len(values))
        return output

    def _generate(self, prompts: list):
        output = super()._generate(prompts)
        rows = self._edit_inputs
        if rows is None or len(rows) != len(prompts):
            return output
        prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = output
        if tool_mask is not None or logprobs is not None or len(completion_ids) != len(rows):
            return output  # tools, a rollout or vLLM: tokens the edit would not match (checks.py refuses)
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        eos = set(self.eos_token_ids)
        step = self.state.global_step
        self._draw = (step, self._draw[1] + 1 if self._draw[0] == step else 0)
        for row, (ids, values) in enumerate(zip(completion_ids, rows, strict=True)):
            rng = random.Random(
                f"fleet_rl/edit_exploration/{self.args.seed}/{step}/{self._draw[1]}/"
                f"{self.accelerator.process_index}/{row}"
            )
            draw = rng.random()
            repair = draw < self.explore_repair_rate
            if not repair and draw - self.explore_repair_rate >= self.explore_edit_rate:
                continue
            if values.get("agent") or not ids or ids[-1] not in eos:
                continue
            text = tokenizer.decode(ids, skip_special_tokens=True)
            if repair:
                edit = best_repair(
                    text,
                    values["scenario"],
                    rng,
                    fleet_reward,
                    draws=self.explore_repair_draws,
                    place_omitted=self.explore_repair_place_omitted,
                    too_slow=self.explore_repair_too_slow,
                )
            else:
                edit = edit_answer(text, values["scenario"], rng)
            if edit is None:
                continue
            edited_ids = tokenizer.encode(edit[0], add_special_tokens=False) + [ids[-1]]
            if len(edited_ids) > self.max_completion_length:
                continue
            completion_ids[row] = edited_ids
            completions[row] = (
                [{"role": "assistant", "content": edit[0]}] if isinstance(completions[row], list) else edit[0]
            )
            self._edited_rows.append(row)
            if repair:
                self._repaired_rows.append(row)
        return prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images
