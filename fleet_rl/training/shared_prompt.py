"""Run a group's shared prompt through the model once, not once per answer: the same numbers, fewer FLOPs.

On the CPU presets a step is one prompt and its ``num_generations`` answers. TRL's transformers path feeds the
prompt with every answer: the 8 answers of a SmolLM2 facts step are ~850 tokens each, ~730 of them the same
prompt, so generation's prefill and the loss's forward and backward passes each process the prompt 8 times
(generation 36 %, forward 25 %, backward 39 % of a 143 s step).
``FleetGRPOTrainer`` (``share_prompt: true``, the default) runs the prompt once and hands its key/value cache
to every answer:

- **Generation**: the prompt (all but its last token) fills a cache for one row; the cache is repeated for
  the group and ``generate`` goes on from it, sampling each answer as before.
- **Log-probabilities** (the loss, and TRL's old log-probs when it needs them): one forward of the prompt
  with gradients, its cache repeated for the answers, then the answers (after the prompt's last token)
  attend to it. Backpropagation sums the answers' gradients through the repeat into the one prompt pass,
  so the loss and every gradient equal TRL's up to float rounding (tests/training/test_shared_prompt.py:
  full fine-tuning, LoRA, QLoRA on an NF4 base).

It applies where the batch's rows come in runs of two or more adjacent rows with the same prompt tokens and
mask (``prompt_runs``): one prompt per step (the SmolLM2 preset), or several prompts whose groups TRL lays
out one after another (each run is shared on its own: generation prefills each run's prompt once, the loss
runs each run's prompt once). Anything else takes TRL's own path: a lone row, vLLM, images, tools, MoE
auxiliary losses, gradient checkpointing (it drops the cache) and, in the loss, a model wrapped for several
processes (DDP, FSDP, DeepSpeed: one forward pass per backward). Positions count from the first column,
padding included, as TRL's own forward does. A SmolLM2 facts step: 161.6 s on TRL's path, 76.2 s shared
(docs/training.md "The shared prompt").
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

__all__ = [
    "can_share_generation",
    "can_share_logps",
    "generation_runs",
    "prompt_runs",
    "rows_share_prefix",
    "shared_prompt_generate",
    "shared_prompt_logps",
    "tokens_until_eos",
]


def rows_share_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, prefix_len: int) -> bool:
    """True when two rows or more have the same first ``prefix_len`` tokens and mask, all of them."""
    return prompt_runs(input_ids, attention_mask, prefix_len) == [slice(0, input_ids.size(0))]


def prompt_runs(input_ids: torch.Tensor, attention_mask: torch.Tensor, prefix_len: int) -> list[slice] | None:
    """The runs of adjacent rows with the same first ``prefix_len`` tokens and mask (a GRPO batch lays each
    prompt's group out together), when every run has two rows or more and there is a prefix to cache; else
    None: a lone row gains nothing from a shared pass."""
    if input_ids.size(0) < 2 or prefix_len < 2:
        return None
    ids, mask = input_ids[:, :prefix_len], attention_mask[:, :prefix_len]
    same_as_previous = ((ids[1:] == ids[:-1]) & (mask[1:] == mask[:-1])).all(dim=1)
    return _runs((torch.nonzero(~same_as_previous).flatten() + 1).tolist(), input_ids.size(0))


def _runs(changes: list[int], rows: int) -> list[slice] | None:
    """The runs of rows between the rows where the prompt changes, or None if a run has a single row."""
    starts = [0, *changes, rows]
    runs = [slice(start, end) for start, end in zip(starts, starts[1:], strict=False)]
    return runs if all(run.stop - run.start >= 2 for run in runs) else None


def tokens_until_eos(completion_ids: torch.Tensor, eos_token_ids: list[int]) -> list[list[int]]:
    """Each row's tokens up to and including its first end-of-sequence token (all of them if none)."""
    is_eos = torch.isin(completion_ids, torch.tensor(eos_token_ids, device=completion_ids.device))
    first_eos = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), completion_ids.size(1))
    rows = zip(completion_ids.cpu(), first_eos.cpu(), strict=True)
    return [row[: int(end) + 1].tolist() for row, end in rows]


def _prompt_cache(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> DynamicCache:
    """The key/value cache of one row's prompt, filled by one forward pass (with gradients if enabled)."""
    cache = DynamicCache(config=model.config)
    model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    return cache


def _repeated(cache: DynamicCache, rows: int, config) -> DynamicCache:
    """A fresh cache holding ``cache``'s keys and values repeated for ``rows`` rows (differentiable)."""
    repeated = DynamicCache(config=config)
    for layer_idx, layer in enumerate(cache.layers):
        shape = (rows, *layer.keys.shape[1:])
        repeated.update(layer.keys.expand(shape), layer.values.expand(shape), layer_idx)
    return repeated


def can_share_logps(trainer, model, input_ids, attention_mask, logits_to_keep, compute_aux_loss, multimodal):
    """Whether the loss's pass may run each prompt once: the rows come in runs that share one
    (``prompt_runs``), and neither gradient checkpointing (it drops the cache in training), a model wrapped
    for several processes (DDP, FSDP, DeepSpeed: one forward pass per backward), an auxiliary loss nor
    images are in the way."""
    prompt_len = input_ids.size(1) - logits_to_keep
    return (
        not (compute_aux_loss or trainer.args.gradient_checkpointing)
        and trainer.accelerator.unwrap_model(model) is model
        and all(value is None for value in multimodal.values())
        and prompt_runs(input_ids, attention_mask, prompt_len) is not None
    )


def shared_prompt_logps(
    trainer, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
):
    """TRL's per-token log-probs and entropies of the completion tokens, with each run's prompt run once
    (``prompt_runs``: one run when the batch is one prompt's group)."""
    # the prompt but its last token fills the cache; the last token starts the answers' pass, so that its
    # output scores the first answer token
    cached = input_ids.size(1) - logits_to_keep - 1
    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for run in prompt_runs(input_ids, attention_mask, cached + 1):
        first = slice(run.start, run.start + 1)  # the run's rows share this row's prompt
        with trainer.accelerator.autocast():
            cache = _prompt_cache(model, input_ids[first, :cached], attention_mask[first, :cached])
        for start in range(run.start, run.stop, batch_size):  # the run's answers attend to its cache
            rows = slice(start, min(start + batch_size, run.stop))
            answers_ids, answers_mask = input_ids[rows, cached:], attention_mask[rows]
            # the fused head scores labels[:, 1:], the answer tokens; padding is not scored
            labels = answers_ids.masked_fill(answers_mask[:, cached:] == 0, -100)
            repeated = _repeated(cache, answers_ids.size(0), model.config)
            with trainer.accelerator.autocast():
                outputs = model(
                    input_ids=answers_ids, attention_mask=answers_mask, past_key_values=repeated,
                    labels=labels, fused_lm_head=True,
                )  # fmt: skip
            logps.append(outputs.log_probs[:, -logits_to_keep:])
            if compute_entropy:
                entropies.append(outputs.entropy[:, -logits_to_keep:])
    return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None


def can_share_generation(trainer, prompt_ids, images, multimodal_fields, has_tool_images) -> bool:
    """Whether generation may prefill each prompt once: TRL's transformers path (no vLLM, no continuous
    batching, no padding multiple), text only, and the rows in runs of two or more with one prompt of two
    tokens or more (``generation_runs``)."""
    return (
        not trainer.use_vllm
        and not trainer.use_transformers_continuous_batching
        and images is None
        and not has_tool_images
        and not multimodal_fields
        and trainer.pad_to_multiple_of is None
        and generation_runs(prompt_ids) is not None
    )


def generation_runs(prompt_ids: list[list[int]]) -> list[slice] | None:
    """The runs of adjacent rows with the same prompt (TRL lays each prompt's group out together), when
    every run has two rows or more and prompts of two tokens or more; else None."""
    if not prompt_ids or any(len(ids) < 2 for ids in prompt_ids):
        return None
    changes = [k for k in range(1, len(prompt_ids)) if prompt_ids[k] != prompt_ids[k - 1]]
    return _runs(changes, len(prompt_ids))


def shared_prompt_generate(trainer, prompt_ids) -> tuple[list[list[int]], None]:
    """TRL's transformers generation, with each run's prompt (``generation_runs``) prefilled once; the runs
    are generated one after another, their answers returned in the rows' order."""
    answers: list[list[int]] = []
    with (  # profiled under TRL's name, which the learning benchmark's time split reads
        profiling_context(trainer, "transformers.generate"),
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            generation_kwargs=trainer.generation_kwargs,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as unwrapped_model,
        torch.no_grad(),
        trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False),
    ):
        for run in generation_runs(prompt_ids):
            prompt = torch.tensor([prompt_ids[run.start]], device=trainer.accelerator.device)
            rows = run.stop - run.start
            cache = _prompt_cache(unwrapped_model, prompt[:, :-1], torch.ones_like(prompt[:, :-1]))
            cache.batch_repeat_interleave(rows)
            ids = prompt.repeat(rows, 1)
            generated = unwrapped_model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                past_key_values=cache,
                generation_config=trainer.generation_config,
            )
            answers += tokens_until_eos(generated[:, prompt.size(1) :], trainer.eos_token_ids)
    return answers, None
