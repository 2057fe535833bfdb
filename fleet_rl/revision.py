"""Revision episodes: a plan, the kernel's verdict on it, a revised plan, as one conversation in tokens.

A plan scored once tells a policy nothing about which of its choices broke it. In a revision episode the
policy writes a plan; the kernel's verdict comes back as a user message (each job's status, its memory
need against the GPU's capacity, the reasons: ``fleet_rl.env.feedback.Verdict.text``) with a request to
revise; the policy answers with a whole new plan; and so on, until a plan runs every job (nothing left to
fix) or ``max_turns`` plans have been written. The episode's answer is its last plan. Fixing one named
fault (a job out of memory by 12 GB, a format the GPU lacks) is a local step a small model can learn,
where a whole plan at once is not.

``run_revisions(...)`` plays a batch of episodes turn by turn with any ``generate`` callable that maps
token-id prompts to generated token ids: TRL's generation inside ``GRPOTrainer``
(``fleet_rl.training.revision_rollout``) and greedy ``model.generate`` for the held-out evaluation
(``fleet_rl.training.heldout``), so both see the same conversation, token for token. Each episode keeps the
ids of everything after its prompt (its answers and the verdict messages between them) and a mask that is 1
on the tokens the policy wrote and 0 on the verdicts, which is what TRL's ``env_mask`` wants: the loss is
taken on the policy's tokens only.

The verdict is scored by the training reward's own path (``fleet_rl.env.feedback.verdict``), so each turn's
reward is exactly ``rewards.fleet_reward`` of that plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "HELD_OUT_MAX_TURNS",
    "REVISE_REQUEST",
    "RevisionEpisode",
    "feedback_suffix_ids",
    "run_revisions",
    "verdict_message",
]

# A revising policy's held-out answer: its final plan after at most two verdicts. Each turn costs a
# generation pass over a longer context: on 2 CPU cores three plans keep the evaluation of 96 scenarios
# within the budget of a learning-benchmark run (benchmarks/learning.py --eval_max_turns asks for more).
HELD_OUT_MAX_TURNS = 3
REVISE_REQUEST = "Revise the plan: fix what failed and answer with the whole corrected plan."
_ANSWER_MARKER = "\u2063revision-answer\u2063"  # stands for an answer while rendering the chat template


@dataclass
class RevisionEpisode:
    """One episode: the request, every plan written (text), each plan's verdict, and the token ids after
    the prompt with their mask (1: written by the policy, 0: a verdict message) and the plan each token
    belongs to (``plan_of_token``: 1 for the first plan's tokens, 2 for the first revision's, 0 on the
    verdicts), which per-turn credit (``fleet_rl.training.turn_credit``) reads, and which plans were written
    for the policy rather than generated (``written_turns``, 1-based; ``run_revisions``'s ``written``)."""

    request: object  # fleet_rl.env.feedback.EpisodeRequest
    answers: list[str] = field(default_factory=list)
    verdicts: list = field(default_factory=list)  # fleet_rl.env.feedback.Verdict per answer
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    plan_of_token: list[int] = field(default_factory=list)
    written_turns: list[int] = field(default_factory=list)  # plans written for the policy (``written``)

    @property
    def done(self) -> bool:
        """Nothing left to fix: the last plan is valid and every job in it runs."""
        if not self.verdicts:
            return False
        last = self.verdicts[-1]
        return bool(last.valid) and bool(last.jobs) and all(job["status"] == "ok" for job in last.jobs)

    @property
    def final_answer(self) -> str:
        return self.answers[-1] if self.answers else ""

    @property
    def turns(self) -> int:
        return len(self.answers)


def verdict_message(verdict, turn: int, max_turns: int) -> str:
    """The user message after plan ``turn``: the kernel's verdict and the request to revise."""
    return f"{verdict.text(turn, max_turns)}\n{REVISE_REQUEST}"


def feedback_suffix_ids(
    tokenizer, message: str, answer_ended: bool, eos_token_ids: Sequence[int]
) -> list[int]:
    """The token ids that follow an answer in the chat template: the close of the assistant turn (unless the
    answer already ended with it), the user ``message``, and the start of the next assistant turn.

    Rendered from the tokenizer's own chat template around a marker answer, so that any template works
    (ChatML for SmolLM2 and Qwen, Llama 3's headers for the tiny test model), as TRL renders tool results."""
    conversation = [
        {"role": "user", "content": "-"},
        {"role": "assistant", "content": _ANSWER_MARKER},
        {"role": "user", "content": message},
    ]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    after = text[text.index(_ANSWER_MARKER) + len(_ANSWER_MARKER) :]
    ids = tokenizer(after, add_special_tokens=False)["input_ids"]
    if answer_ended and ids and ids[0] in eos_token_ids:
        ids = ids[1:]  # the answer's own end-of-turn token already closes it
    return ids


def run_revisions(
    prompt_ids: Sequence[Sequence[int]],
    requests: Sequence,
    generate: Callable[[list[list[int]], int], list[list[int]]],
    tokenizer,
    *,
    max_turns: int,
    eos_token_ids: Sequence[int],
    written: Callable[[int, RevisionEpisode, int], list[int] | None] | None = None,
) -> list[RevisionEpisode]:
    """Play one revision episode per prompt (see the module docstring).

    ``generate(id_prompts, turn)`` returns the generated ids for each prompt (turn 1 is the first plan);
    ``requests[i]`` is episode i's ``EpisodeRequest``. Episodes that are done stop; the others get the
    verdict and revise, all in one ``generate`` call per turn, until ``max_turns`` plans.

    ``written(i, episode, turn)``, where given, may write revision ``turn`` (>= 2) of episode ``i`` for the
    policy: the ids it returns are that plan (scored, masked 1 and trained on like a generated one), and
    ``None`` leaves it to ``generate``. Training's repairs from the verdict use it
    (``fleet_rl.training.revision_rollout``); the plan's index is in ``episode.written_turns``."""
    # the training reward's scoring path, with the kernel's feedback
    from fleet_rl.env.feedback import verdict

    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    if len(prompt_ids) != len(requests):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(requests)} requests")
    episodes = [RevisionEpisode(request) for request in requests]
    eos = set(eos_token_ids)
    active = list(range(len(episodes)))
    for turn in range(1, max_turns + 1):
        plans: dict[int, list[int]] = {}
        if written is not None and turn > 1:
            for i in active:
                ids = written(i, episodes[i], turn)
                if ids is not None:
                    plans[i] = list(ids)
                    episodes[i].written_turns.append(turn)
        sampled = [i for i in active if i not in plans]
        if sampled:
            contexts = [list(prompt_ids[i]) + episodes[i].completion_ids for i in sampled]
            plans |= dict(zip(sampled, generate(contexts, turn), strict=True))
        for i in active:
            episode, ids = episodes[i], list(plans[i])
            text = tokenizer.decode(ids, skip_special_tokens=True)
            episode.answers.append(text)
            episode.verdicts.append(verdict(episode.request, text))
            episode.completion_ids += ids
            episode.env_mask += [1] * len(ids)
            episode.plan_of_token += [turn] * len(ids)
        active = [i for i in active if not episodes[i].done]
        if turn == max_turns or not active:
            break
        for i in active:
            episode = episodes[i]
            answer_ended = bool(episode.completion_ids) and episode.completion_ids[-1] in eos
            suffix = feedback_suffix_ids(
                tokenizer, verdict_message(episode.verdicts[-1], turn, max_turns), answer_ended, eos_token_ids
            )
            episode.completion_ids += suffix
            episode.env_mask += [0] * len(suffix)
            episode.plan_of_token += [0] * len(suffix)
    return episodes
