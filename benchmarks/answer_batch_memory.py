"""Peak memory of training on whole answers: one padded batch against the same answers one at a time; JSON.

    python benchmarks/answer_batch_memory.py --model outputs/models/smollm2-135m-instruct
    python benchmarks/answer_batch_memory.py --model runs/preset/warm-start --lengths 1100 1000 900 1050
    python benchmarks/answer_batch_memory.py --model runs/preset/warm-start --lengths 1100 1000  # replayed

Expert iteration's SFT pass (fleet_rl/training/expert_iteration.py) trains on kept answers with their prompts,
~1,100 SmolLM2 tokens each on the sized prompt, and self-imitation replays two stored answers a step
(fleet_rl/training/self_imitation.py). A padded batch keeps every answer's activations (and, with padding,
sdpa's masked attention weights) until its backward pass; one unpadded answer at a time keeps one answer's,
whether each has its own backward pass (``one_at_a_time``, how the SFT pass ran at commit 3d32689) or each is
differentiated alone and their sum gets one backward pass later (``precomputed``, how both run now:
fleet_rl/training/precomputed_gradient.py). This runs the three on random tokens of ``--lengths`` with the
model in fp32 (every weight trained: an upper bound for LoRA), a forward pass over the last 257 positions'
logits (an answer of 256 tokens and its prompt's last) and a backward pass of their mean log-sum-exp,
``--repeats`` times each, and prints each try's peak RSS (``benchmarks.process_memory.PeakRss``, glibc's freed
pages returned before each try) and seconds. Measure alone: another process changes both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the packages, when run as `python benchmarks/answer_batch_memory.py`
    sys.path.insert(0, str(REPO))

LOGITS_KEPT = 257
MODES = ("padded_batch", "one_at_a_time", "precomputed")


def _padded_batch(lengths: list[int], vocab: int, generator) -> tuple:
    import torch

    width = max(lengths)
    rows = [torch.randint(1, vocab, (n,), generator=generator) for n in lengths]
    ids = torch.stack([torch.cat([torch.zeros(width - len(row), dtype=torch.long), row]) for row in rows])
    mask = torch.stack([torch.cat([torch.zeros(width - n, dtype=torch.long), torch.ones(n, dtype=torch.long)])
                        for n in lengths])  # fmt: skip
    return ids, mask


def _answer_loss(model, ids, count: int):
    """One answer's part of the batch's loss: its kept logits' mean log-sum-exp over ``count`` answers."""
    import torch

    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), logits_to_keep=LOGITS_KEPT).logits
    return logits.float().logsumexp(-1).mean() / count


def one_try(model, lengths: list[int], mode: str, seed: int) -> dict:
    """One forward and backward pass over ``lengths``: a padded batch, each answer with its own backward pass
    (``one_at_a_time``) or each answer differentiated alone and their sum given one backward pass
    (``precomputed``: expert iteration's SFT pass and self-imitation's replay)."""
    import torch

    from benchmarks.process_memory import PeakRss
    from fleet_rl.training.memory_release import release_freed_memory
    from fleet_rl.training.precomputed_gradient import sum_one_at_a_time

    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    model.zero_grad(set_to_none=True)
    release_freed_memory()
    with PeakRss(interval_s=0.005) as peak:
        peak.take()
        started = time.perf_counter()
        if mode == "padded_batch":
            ids, mask = _padded_batch(lengths, vocab, generator)
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=LOGITS_KEPT).logits
            logits.float().logsumexp(-1).mean().backward()
        else:
            answers = [torch.randint(1, vocab, (1, n), generator=generator) for n in lengths]
            parts = [lambda ids=ids: _answer_loss(model, ids, len(lengths)) for ids in answers]
            if mode == "precomputed":
                sum_one_at_a_time(parts, list(model.parameters())).backward()
            else:
                for part in parts:
                    part().backward()
        seconds = time.perf_counter() - started
        return {"peak_rss_gib": round(peak.take() or float("nan"), 2), "s": round(seconds, 1)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="outputs/models/smollm2-135m-instruct")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1100, 1000, 900, 1050])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if min(args.lengths) <= LOGITS_KEPT or args.repeats < 1:
        parser.error(f"--lengths must exceed {LOGITS_KEPT} tokens and --repeats be >= 1")

    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.machine import cpu_model, git_state

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.train()
    tries = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
        for mode in MODES:
            tries[mode].append(one_try(model, args.lengths, mode, seed=repeat))
    result = {
        "command": ["python", "benchmarks/answer_batch_memory.py", *(sys.argv[1:] if argv is None else argv)],
        "model": args.model,
        "attention": model.config._attn_implementation,
        "lengths": args.lengths,
        "threads": os.environ.get("OMP_NUM_THREADS", "all cores (OMP_NUM_THREADS unset)"),
        "cpu": cpu_model(),
        "git": git_state(),
        "tries": tries,
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
