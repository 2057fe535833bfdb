"""Expert iteration between GRPO rounds: the kernel picks the best of the policy's samples and their repairs
for many training prompts, and a short SFT pass trains the policy on them.

GRPO sees one prompt a step on the CPU presets (30 in a run) and moves the policy by each answer's advantage
once; self-imitation (``fleet_rl/training/self_imitation.py``) keeps a group's best find, but in 30 steps it
stored 2-6 answers, and every SmolLM2 seed kept its template: bf16 everywhere, tensor parallelism 1, out of
memory on half the held-out scenarios (issue #43). Repairs from the kernel's verdict
(``fleet_rl/training/plan_repairs.py``) turn such an answer into one under which its jobs run, by the
prompt's own ``Fits`` line, and in GRPO's groups they won at 48 of 50 steps; two of them a step are too few
to move the greedy answers. Expert iteration (Anthony et al. 2017; ReST, Gulcehre et al. 2023; rejection
sampling fine-tuning, Touvron et al. 2023) gives them volume:

Every ``expert_iteration_every`` GRPO steps (not after the last), one round:

1. draws ``expert_iteration_prompts`` training prompts (seeded by the run's seed and the step, so a resumed
   run draws the same);
2. samples ``expert_iteration_samples`` answers to each with the current policy at the run's temperature,
   in batches of ``expert_iteration_generation_batch_size`` (16: on a CPU a wider batch samples more
   answers a second; GRPO's own batches are one prompt's group);
3. repairs each whole-plan answer that ended and has a failing or an omitted job
   ``expert_iteration_repairs`` times (each repair draws its own formats among those that fit; an omitted
   job gets one replica: ``repair_answer(..., place_omitted=True)``);
4. scores every answer and repair with the run's reward functions, weighted as GRPO weighs them, and keeps
   each prompt's best (the policy's own answer on a tie) when it reaches ``expert_iteration_min_reward``
   (default 0.3: ``fleet_reward``'s level for a plan under which every job runs);
5. trains the policy on the kept answers for ``expert_iteration_epochs`` passes in batches of
   ``expert_iteration_batch_size``: the mean negative log-likelihood of the answer's tokens (the same
   temperature-scaled log-probabilities as GRPO's loss; each answer's forward and backward pass on its own,
   unpadded, the batch's gradient accumulated), a fresh AdamW at ``expert_iteration_learning_rate`` on the
   trainable parameters, gradients clipped at ``max_grad_norm``. GRPO's optimizer and schedule are left as
   they were.

With self-imitation on, the kept answers also join its buffer and are replayed at the later steps.

Nothing here reads the optimum: the answers are the policy's own, the repairs read the kernel's verdict and
the prompt, and the kernel's reward picks. A round runs at the end of its step, before that step's checkpoint
is written, so the checkpoint holds the trained weights and a resume from it does not repeat the round; a
resume from an earlier checkpoint repeats it with the same draws (prompts and repairs from seeded
generators, sampling under a seeded, forked torch RNG that leaves the trainer's own stream as it was).

Logged with the step: ``expert/kept`` (prompts with a kept answer), ``expert/kept_repaired`` (of them, a
repair), ``expert/sampled_reward`` and ``expert/kept_reward`` (mean reward of the sampled and of the kept
answers), ``expert/sft_loss`` (the SFT batches' mean loss) and ``expert/wall_s``. Each round's kept answers
are written to ``<output_dir>/expert_iteration/step-<k>.json`` for reading.

One process only (``fleet_rl/training/checks.py`` refuses more): the SFT pass steps the model directly, and
processes would need agreed batches to keep their weights equal.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import TrainerCallback

from fleet_rl.training.heldout import generate_ids, prompt_ids
from fleet_rl.training.memory_release import ReleaseFreedMemory, release_freed_memory
from fleet_rl.training.plan_repairs import repair_answer
from fleet_rl.training.self_imitation import SelfImitationTrainer, StoredAnswer

__all__ = ["ExpertCandidate", "ExpertIterationTrainer", "best_candidates", "candidate_answers"]

ROUNDS_DIR = "expert_iteration"


@dataclass(frozen=True)
class ExpertCandidate:
    """One answer a round may keep: which prompt it answers, its text and whether a repair wrote it."""

    prompt: int  # index into the round's prompts
    answer: int  # index into the round's sampled answers
    text: str
    repaired: bool


def candidate_answers(
    texts: list[str], ended: list[bool], rows: list[dict], samples: int, repairs: int, seed: str
) -> list[ExpertCandidate]:
    """Each sampled answer and up to ``repairs`` distinct repairs of it (failing jobs repaired, omitted ones
    placed). ``texts[k]`` answers prompt ``k // samples``, whose dataset row is ``rows[k // samples]``.
    Repairs only of whole-plan rows (a multi-agent row asks for one job), each drawn from
    ``Random(f"{seed}/{k}/{r}")``. Answers that did not end are left out: a cut-off answer has no whole plan
    and cannot be trained as written."""
    candidates: list[ExpertCandidate] = []
    for k, (text, done) in enumerate(zip(texts, ended, strict=True)):
        if not done:
            continue
        row = rows[k // samples]
        candidates.append(ExpertCandidate(k // samples, k, text, False))
        if row.get("agent"):
            continue
        seen = {text}
        for r in range(repairs):
            repair = repair_answer(
                text, row["scenario"], random.Random(f"{seed}/{k}/{r}"), place_omitted=True
            )
            if repair is not None and repair[0] not in seen:
                seen.add(repair[0])
                candidates.append(ExpertCandidate(k // samples, k, repair[0], True))
    return candidates


def best_candidates(
    candidates: list[ExpertCandidate], rewards: list[float], min_reward: float
) -> dict[int, tuple[ExpertCandidate, float]]:
    """Per prompt, the candidate with the highest reward (the first on a tie: the policy's own answer comes
    before its repairs) when it reaches ``min_reward``; NaN rewards (unscored) never win."""
    best: dict[int, tuple[ExpertCandidate, float]] = {}
    for candidate, reward in zip(candidates, rewards, strict=True):
        if math.isnan(reward) or reward < min_reward:
            continue
        held = best.get(candidate.prompt)
        if held is None or reward > held[1]:
            best[candidate.prompt] = (candidate, reward)
    return best


class _RoundAtStepEnd(TrainerCallback):
    """Runs the trainer's round at the end of every ``every``-th step but the last, before its checkpoint."""

    def __init__(self, trainer: ExpertIterationTrainer, every: int) -> None:
        self.trainer, self.every = trainer, every

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0 and state.global_step < state.max_steps:
            self.trainer.expert_round()


class ExpertIterationTrainer(SelfImitationTrainer):
    """``SelfImitationTrainer`` (with its options; ``self_imitation_coef`` 0 is GRPO with this repo's
    extensions) plus a round of expert iteration every ``expert_iteration_every`` steps (module
    docstring)."""

    def __init__(
        self,
        *args,
        expert_iteration_every: int,
        expert_iteration_prompts: int = 32,
        expert_iteration_samples: int = 2,
        expert_iteration_repairs: int = 2,
        expert_iteration_min_reward: float = 0.3,
        expert_iteration_epochs: int = 1,
        expert_iteration_batch_size: int = 4,
        expert_iteration_generation_batch_size: int = 16,
        expert_iteration_learning_rate: float = 1e-4,
        **kwargs,
    ) -> None:
        counts = {
            "expert_iteration_every": expert_iteration_every,
            "expert_iteration_prompts": expert_iteration_prompts,
            "expert_iteration_samples": expert_iteration_samples,
            "expert_iteration_epochs": expert_iteration_epochs,
            "expert_iteration_batch_size": expert_iteration_batch_size,
            "expert_iteration_generation_batch_size": expert_iteration_generation_batch_size,
        }
        for name, value in counts.items():
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if expert_iteration_repairs < 0 or expert_iteration_learning_rate <= 0:
            raise ValueError("expert_iteration_repairs must be >= 0 and expert_iteration_learning_rate > 0")
        super().__init__(*args, **kwargs)
        if self.accelerator.num_processes > 1:
            raise ValueError("expert iteration runs in one process; launch without accelerate's processes")
        if any(isinstance(func, nn.Module) for func in self.reward_funcs):
            raise ValueError("expert iteration scores with reward functions, not reward models")
        self.expert_iteration_prompts = expert_iteration_prompts
        self.expert_iteration_samples = expert_iteration_samples
        self.expert_iteration_repairs = expert_iteration_repairs
        self.expert_iteration_min_reward = expert_iteration_min_reward
        self.expert_iteration_epochs = expert_iteration_epochs
        self.expert_iteration_batch_size = expert_iteration_batch_size
        self.expert_iteration_generation_batch_size = expert_iteration_generation_batch_size
        self.expert_iteration_learning_rate = expert_iteration_learning_rate
        self.add_callback(_RoundAtStepEnd(self, expert_iteration_every))

    # --- one round ------------------------------------------------------------------------------------------
    def expert_round(self) -> dict:
        """Sample, repair, pick and train (module docstring); returns the round's figures (also logged)."""
        started = time.perf_counter()
        step = self.state.global_step
        seed = f"fleet_rl/expert_iteration/{self.args.seed}/{step}"
        dataset = self.train_dataset
        picks = random.Random(seed).sample(
            range(len(dataset)), min(self.expert_iteration_prompts, len(dataset))
        )
        rows = [dataset[index] for index in picks]
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        prompts = self._prompt_token_ids(tokenizer, rows)

        samples = self.expert_iteration_samples
        with torch.random.fork_rng(devices=[]):  # the trainer's own CPU stream is left as it was
            torch.manual_seed(random.Random(seed).getrandbits(63))
            continuations = generate_ids(
                self.model,
                tokenizer,
                [ids for ids in prompts for _ in range(samples)],
                self.max_completion_length,
                self.expert_iteration_generation_batch_size,
                temperature=self.temperature,
            )
        if any(isinstance(callback, ReleaseFreedMemory) for callback in self.callback_handler.callbacks):
            release_freed_memory()  # the generation's freed memory back before the SFT pass's
        eos = set(self.eos_token_ids)
        texts = tokenizer.batch_decode(continuations, skip_special_tokens=True)
        ended = [bool(ids) and ids[-1] in eos for ids in continuations]
        candidates = candidate_answers(texts, ended, rows, samples, self.expert_iteration_repairs, seed)
        candidate_rows = [rows[c.prompt] for c in candidates]
        rewards = self._rewards(candidate_rows, [c.text for c in candidates])
        sampled = [
            r for c, r in zip(candidates, rewards, strict=True) if not c.repaired and not math.isnan(r)
        ]

        targets: list[StoredAnswer] = []
        kept = []
        by_prompt = best_candidates(candidates, rewards, self.expert_iteration_min_reward)
        for prompt, (candidate, reward) in sorted(by_prompt.items()):
            completion = tokenizer.encode(candidate.text, add_special_tokens=False) + [tokenizer.eos_token_id]
            if len(completion) > self.max_completion_length:
                continue
            targets.append(StoredAnswer(prompts[prompt], completion, [1] * len(completion), reward, step))
            kept.append({
                "prompt": picks[prompt],
                "task": rows[prompt].get("task"),
                "seed": rows[prompt].get("seed"),
                "reward": reward,
                "repaired": candidate.repaired,
                "answer": candidate.text,
            })  # fmt: skip
        losses = self._fine_tune(targets, random.Random(seed)) if targets else []
        if self.self_imitation_coef > 0:
            for target in targets:
                self.imitation_buffer.offer(target)

        figures = {
            "kept": float(len(targets)),
            "kept_repaired": float(sum(entry["repaired"] for entry in kept)),
            "sampled_reward": sum(sampled) / len(sampled) if sampled else float("nan"),
            "kept_reward": sum(t.reward for t in targets) / len(targets) if targets else float("nan"),
            "sft_loss": sum(losses) / len(losses) if losses else float("nan"),
            "wall_s": time.perf_counter() - started,
        }
        for name, value in figures.items():
            self._metrics["train"][f"expert/{name}"].append(value)
        self._write_round(step, figures, kept)
        print(
            f"expert iteration at step {step}: {len(prompts)} prompts x {samples} answers, kept "
            f"{len(targets)} ({int(figures['kept_repaired'])} repaired), reward sampled "
            f"{figures['sampled_reward']:.3f} -> kept {figures['kept_reward']:.3f}, SFT loss "
            f"{figures['sft_loss']:.3f}, {figures['wall_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        return figures

    def _prompt_token_ids(self, tokenizer, rows: list[dict]) -> list[list[int]]:
        """What generation starts from: the chat template's answer header for conversational prompts (as
        the held-out evaluation), the text's tokens for plain ones."""
        if isinstance(rows[0]["prompt"], list):
            return prompt_ids(tokenizer, [row["prompt"] for row in rows])
        return [tokenizer(row["prompt"])["input_ids"] for row in rows]

    def _rewards(self, rows: list[dict], texts: list[str]) -> list[float]:
        """The run's reward functions on ``texts`` (answers to ``rows``), weighted as GRPO weighs them; NaN
        where no function scored."""
        if not texts:
            return []
        conversational = isinstance(rows[0]["prompt"], list)
        completions = [[{"role": "assistant", "content": t}] if conversational else t for t in texts]
        columns = {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}
        per_func = torch.full((len(texts), len(self.reward_funcs)), float("nan"))
        for i, func in enumerate(self.reward_funcs):
            values = func(prompts=[row["prompt"] for row in rows], completions=completions, **columns)
            per_func[:, i] = torch.tensor([math.nan if v is None else float(v) for v in values])
        total = (per_func * self.reward_weights.cpu().unsqueeze(0)).nansum(dim=1)
        total[torch.isnan(per_func).all(dim=1)] = math.nan
        return total.tolist()

    def _fine_tune(self, targets: list[StoredAnswer], rng: random.Random) -> list[float]:
        """``expert_iteration_epochs`` passes over ``targets`` in shuffled batches; each batch's loss."""
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(parameters, lr=self.expert_iteration_learning_rate, weight_decay=0.0)
        size = self.expert_iteration_batch_size
        was_training = self.model.training
        self.model.train()
        losses = []
        try:
            for _ in range(self.expert_iteration_epochs):
                order = rng.sample(targets, len(targets))
                for start in range(0, len(order), size):
                    losses.append(self._batch_gradients(order[start : start + size]))
                    if self.args.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(parameters, self.args.max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
        finally:
            self.model.train(was_training)
        return losses

    def _batch_gradients(self, batch: list[StoredAnswer]) -> float:
        """Accumulate the gradient of ``batch``'s mean negative log-likelihood per loss-carrying token (the
        batch's ``_answers_nll``) one unpadded answer at a time (``_answers_nll_one_at_a_time``); returns
        that loss. A padded batch holds every answer's activations until its backward pass
        (``benchmarks/answer_batch_memory.py``; docs/training.md "Memory")."""
        loss = self._answers_nll_one_at_a_time(self.model, batch)
        loss.backward()
        return float(loss.detach())

    def _write_round(self, step: int, figures: dict, kept: list[dict]) -> None:
        """The round's figures and kept answers as JSON under ``output_dir`` (whole or not at all)."""
        directory = Path(self.args.output_dir, ROUNDS_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"step-{step}.json"
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps({"step": step, **figures, "kept": kept}, indent=1))
        temporary.replace(path)
