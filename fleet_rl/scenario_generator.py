"""Procedural scenario generator: ``make_scenario(task, seed, split)`` for the task tiers in ``TASKS``.

Every scenario is drawn from one ``random.Random`` seeded with the string ``"fleet_rl/<task>/<split>/<seed>"``
(string seeds are hashed with SHA-512 by ``random``, so they are stable across processes and Python runs,
unlike ``hash(str)``). No global RNG is touched, so datasets are virtual: item ``seed`` of a task is the same
everywhere, reasoning-gym style. Print one with
``python3 -c "from fleet_rl import make_scenario; print(make_scenario('medium', 7).to_json())"``.

Tiers (parameters in ``TIERS`` below, one ``TierSpec`` each; the kernel engineer tunes them there):

- ``easy``: one job on 1-8 GPUs, half the clusters small or format-limited GPUs; 7-8B models and GPT-2,
  a quarter 46-73B (serve, lora); contexts up to 32k, serve batches from 1 to 512, often a prompt to
  prefill, often a quality tolerance. One job, but its settings depend on everything about it: no fixed
  setting per kind does well (``benchmarks/reward/templates.py``).
- ``medium``: 2-3 jobs of mixed kinds on 4-8 GPUs; 7-8B models, a fifth 70B (serve, lora); batch and context
  large enough that KV cache and activations, not just weights, decide what fits.
- ``hard``: 4-5 jobs on 8 GPUs; half the clusters are small or format-limited GPUs (no FP8 on A100/A10G, no
  BF16 or FP8 on T4); at least one 46-73B job; longer contexts, bigger batches; quality tolerances
  (``max_quality_loss``) on half the serve jobs.
- ``multiagent``: 3-4 jobs on 8 GPUs, between medium and hard (the prompt, not the scenario, makes it
  multi-agent: each agent plans one job given the others' parts).

Throughput floors (``min_tokens_per_s``: a serving SLO, a training deadline) on a share of the jobs (easy
3/4, medium 0.6, hard 1/4, multiagent 0.4), at 0.5, 0.7 or 0.9 of the job's best speed on its even share of
the cluster. A missed floor (too slow, crashed or idle) costs the job's priority, so "every GPU to the top
job" and "a fixed safe setting" both lose, while a split and settings read from this scenario meet them all
(``benchmarks/reward/templates.py``).

Every tier draws serve jobs' ``prompt_len`` as a fraction of ``seq_len`` (decode-only, a short prompt,
prefill-heavy, nearly all prefill): decode is memory-bound and prefill compute-bound, so the best weight
format depends on it. Tolerances (0.2 %, 1 %, 5 %) rule out int4, then int8, for the jobs that carry them.

Held-out split (generalisation test): ``HELD_OUT_GPUS`` (l40s, h200) and ``HELD_OUT_MODELS`` (qwen2.5-7b)
never appear with ``split="train"``; every ``split="eval"`` scenario uses at least one of them (a held-out
cluster GPU or a held-out model on one job, half and half; the rest of an eval scenario draws from the full
catalog, so held-out items are over-represented in eval by design).

Sanity filter: each job must be able to run alone on the whole cluster in its most compact configuration
(int4 weights and 1-byte KV cache for frozen weights, micro-batch 1 with full recomputation for training),
by a rough per-GPU estimate (``_footprint_gb``, DESIGN.md §4 formulas, tensor parallelism as the only
sharding). It only rejects hopeless draws; whether and how jobs fit *together* is the kernel's question.
Full-parameter training is drawn only for models up to 8B (a 70B model needs ~1.1 TB of Adam state).
"""

from __future__ import annotations

import functools
import math
import operator
import random
from dataclasses import dataclass
from typing import Literal

import msgspec
import numpy as np

from fleet_rl.catalog import GPUS, MODELS, ModelSpec
from fleet_rl.kernel.constants import ADAM_BYTES_PER_PARAM, CUDA_CONTEXT_BYTES
from fleet_rl.plan_schema import TENSOR_PARALLEL_SIZES
from fleet_rl.scenario import Cluster, Job, Scenario

__all__ = [
    "HELD_OUT_GPUS",
    "HELD_OUT_MODELS",
    "JOB_NAMES",
    "SPLITS",
    "TASKS",
    "TIERS",
    "TierSpec",
    "make_scenario",
]

TASKS: tuple[str, ...] = ("easy", "medium", "hard", "multiagent")
SPLITS: tuple[str, ...] = ("train", "eval")
HELD_OUT_GPUS: tuple[str, ...] = ("l40s", "h200")
HELD_OUT_MODELS: tuple[str, ...] = ("qwen2.5-7b",)


@dataclass(frozen=True)
class TierSpec:
    """How one task tier draws scenarios. Ranges are inclusive; probabilities are per draw."""

    job_count: tuple[int, int]
    gpu_count: tuple[int, int]
    gpus: tuple[str, ...]  # cluster GPU, uniform ...
    budget_gpus: tuple[str, ...]  # ... or, with budget_gpu_prob, one of these small / format-limited GPUs
    budget_gpu_prob: float
    kinds: tuple[str, ...]  # job kinds, uniform
    mixed_kinds: bool  # with several jobs, not all of one kind
    small_models: tuple[str, ...]  # <= 8B: any kind
    large_models: tuple[str, ...]  # 46-73B: only large_model_kinds
    large_model_kinds: tuple[str, ...]
    large_model_prob: float  # per job
    min_large_jobs: int
    gpt2_prob: float  # per small-model job
    seq_lens: tuple[int, ...]  # uniform, filtered to the model's context window
    serve_batch_sizes: tuple[int, ...]  # concurrent sequences
    train_batch_sizes: tuple[int, ...]  # sequences per optimizer step (train and lora)
    quality_tolerance_prob: float  # per serve job
    quality_tolerances: tuple[float, ...]
    fit: Literal["comfortable", "possible"]  # per-job sanity filter, see _fits
    priorities: tuple[float, ...] = (1.0, 2.0, 3.0)  # per job, uniform
    # serve jobs: prompt_len = round(fraction · seq_len), the fraction uniform from these (0: decode only)
    prompt_fractions: tuple[float, ...] = (0.0,)
    # per job: a min_tokens_per_s of (a fraction, uniform from these) × its best tokens/s alone on its even
    # share of the GPUs, rounded down to 2 significant digits; 0 draws nothing
    floor_prob: float = 0.0
    floor_fractions: tuple[float, ...] = ()


_BIG_GPUS = ("h100-sxm", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "l40s", "b200", "mi300x")  # 40-206 GB
_HBM80_GPUS = ("h100-sxm", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "l40s")  # 40-141 GB
_BUDGET_GPUS = ("a100-40gb", "l4", "a10g", "t4", "rtx-4090")
_SMALL_MODELS = ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b")
_ALL_KINDS = ("train", "lora", "serve")
_LARGE_MODELS = ("llama-3.1-70b", "qwen2.5-72b", "mixtral-8x7b")
_TOLERANCES = (0.002, 0.01, 0.05)  # max_quality_loss: int4 breaks the tight ones, int8 only the tightest
# decode-only, a short prompt, prefill-heavy (a RAG or summarising request), almost all prefill
_PROMPT_FRACTIONS = (0.0, 0.25, 0.9, 0.97)
# throughput floors (min_tokens_per_s) as fractions of the job's best on its even share of the cluster: at
# 0.9 only near-best settings meet it; a missed floor costs the job's priority (kernel/constants.py)
_FLOOR_FRACTIONS = (0.5, 0.7, 0.9)

# fmt: off
TIERS: dict[str, TierSpec] = {
    "easy": TierSpec(
        job_count=(1, 1), gpu_count=(1, 8),
        gpus=_BIG_GPUS, budget_gpus=_BUDGET_GPUS, budget_gpu_prob=0.5,
        kinds=_ALL_KINDS, mixed_kinds=False,
        small_models=_SMALL_MODELS, large_models=_LARGE_MODELS, large_model_kinds=("serve", "lora"),
        large_model_prob=0.25, min_large_jobs=0, gpt2_prob=0.2,
        seq_lens=(1024, 2048, 4096, 8192, 16384, 32768),
        serve_batch_sizes=(1, 4, 16, 64, 256, 512), train_batch_sizes=(4, 8, 16, 64, 128, 256),
        quality_tolerance_prob=0.6, quality_tolerances=_TOLERANCES,
        fit="possible", prompt_fractions=_PROMPT_FRACTIONS,
        floor_prob=0.75, floor_fractions=_FLOOR_FRACTIONS,
    ),
    "medium": TierSpec(
        job_count=(2, 3), gpu_count=(4, 8),
        gpus=_HBM80_GPUS, budget_gpus=("l4", "rtx-4090", "a10g", "t4"), budget_gpu_prob=0.3,
        kinds=_ALL_KINDS, mixed_kinds=True,
        small_models=_SMALL_MODELS, large_models=("llama-3.1-70b", "qwen2.5-72b"),
        large_model_kinds=("serve", "lora"), large_model_prob=0.2,
        min_large_jobs=0, gpt2_prob=0.1,
        seq_lens=(1024, 2048, 4096, 8192),
        serve_batch_sizes=(1, 8, 64, 256), train_batch_sizes=(8, 32, 128),
        quality_tolerance_prob=0.3, quality_tolerances=_TOLERANCES,
        fit="possible", prompt_fractions=_PROMPT_FRACTIONS,
        floor_prob=0.6, floor_fractions=_FLOOR_FRACTIONS,
    ),
    "hard": TierSpec(
        job_count=(4, 5), gpu_count=(8, 8),
        gpus=_HBM80_GPUS, budget_gpus=_BUDGET_GPUS, budget_gpu_prob=0.5,
        kinds=_ALL_KINDS, mixed_kinds=True,
        small_models=_SMALL_MODELS, large_models=_LARGE_MODELS,
        large_model_kinds=("serve", "lora"), large_model_prob=0.3,
        min_large_jobs=1, gpt2_prob=0.1,
        seq_lens=(2048, 4096, 8192, 16384, 32768),
        serve_batch_sizes=(1, 16, 64, 256, 512), train_batch_sizes=(8, 32, 128, 256),
        quality_tolerance_prob=0.5, quality_tolerances=_TOLERANCES,
        fit="possible", prompt_fractions=_PROMPT_FRACTIONS,
        floor_prob=0.25, floor_fractions=_FLOOR_FRACTIONS,
    ),
    "multiagent": TierSpec(
        job_count=(3, 4), gpu_count=(8, 8),
        gpus=_BIG_GPUS, budget_gpus=_BUDGET_GPUS, budget_gpu_prob=0.25,
        kinds=_ALL_KINDS, mixed_kinds=True,
        small_models=_SMALL_MODELS, large_models=_LARGE_MODELS,
        large_model_kinds=("serve", "lora"), large_model_prob=0.2,
        min_large_jobs=0, gpt2_prob=0.1,
        seq_lens=(1024, 2048, 4096, 8192, 16384),
        serve_batch_sizes=(1, 8, 64, 256), train_batch_sizes=(8, 32, 128),
        quality_tolerance_prob=0.3, quality_tolerances=_TOLERANCES,
        fit="possible", prompt_fractions=_PROMPT_FRACTIONS,
        floor_prob=0.4, floor_fractions=_FLOOR_FRACTIONS,
    ),
}
# fmt: on
assert tuple(TIERS) == TASKS

# Meaningful job ids per kind; a repeated name gets a numeric suffix ("chat-2").
_JOB_NAMES: dict[str, tuple[str, ...]] = {
    "serve": ("chat", "code-assist", "batch-infer", "rag", "summarize", "support-bot", "translate"),
    "lora": ("tune", "domain-tune", "instruct-tune", "style-adapter", "sql-adapter"),
    "train": ("pretrain", "finetune", "distill", "continued-pretrain", "reward-model"),
}
JOB_NAMES: tuple[str, ...] = tuple(sorted({name for names in _JOB_NAMES.values() for name in names}))
"""Every base job id the generator draws (a repeated one gets a numeric suffix, "chat-2")."""

# Rough per-GPU memory estimate for the sanity filter that shapes each tier's draws (DESIGN.md §4); the
# kernel's memory model decides what runs, and `_every_job_can_run` asks it. Where the two share a quantity
# the kernel's constant is used; these two are the filter's own round figures (the kernel: 4.127/8 bytes
# per NF4 parameter and LoRA_RANK-sized adapters), kept so that the tiers' scenarios stay as they are.
_INT4_BYTES_PER_PARAM = 0.53  # NF4 with block scales
_LORA_PARAM_FRACTION = 0.005  # rank-16 adapters on every projection: ~0.2-0.5% of the base parameters
_COMFORTABLE_FRACTION = 0.6  # fit="comfortable" (no tier uses it today): bf16 footprint at most this share
_POSSIBLE_FRACTION = 0.9  # others: compact footprint at most this share of a GPU
_JOB_ATTEMPTS = 50
_SCENARIO_ATTEMPTS = 1000


def _max_tensor_parallel(model: ModelSpec, gpu_count: int) -> int:
    """Largest allowed TP degree that fits the cluster and splits the attention and KV heads evenly."""
    return max(
        tp
        for tp in TENSOR_PARALLEL_SIZES
        if tp <= gpu_count and model.num_attention_heads % tp == 0 and model.num_key_value_heads % tp == 0
    )


def _footprint_gb(
    model: ModelSpec, kind: str, seq_len: int, batch_size: int, gpu_count: int, compact: bool
) -> float:
    """Per-GPU memory of one job sharded by the largest TP degree the cluster allows (rough).

    compact=True: the smallest configuration (int4 frozen weights, 1-byte KV, micro-batch 1 with full
    recomputation, ~2·s·h bytes per layer). compact=False: a plain bf16 configuration (bf16 weights and KV,
    micro-batch 1 without recomputation, ~34·s·h bytes per layer with FlashAttention; Korthikanti et al.).
    A serve job holds the KV cache of all ``batch_size`` sequences at once.
    """
    params = model.num_params
    if kind == "train":
        weights = ADAM_BYTES_PER_PARAM * params
    else:
        weights = (_INT4_BYTES_PER_PARAM if compact else 2.0) * params
        if kind == "lora":
            weights += ADAM_BYTES_PER_PARAM * _LORA_PARAM_FRACTION * params
    if kind == "serve":
        transient = model.kv_cache_bytes_per_token(1.0 if compact else 2.0) * seq_len * batch_size
    else:
        transient = (2.0 if compact else 34.0) * seq_len * model.hidden_size * model.num_layers
    return (weights + transient) / _max_tensor_parallel(model, gpu_count) / 1e9 + CUDA_CONTEXT_BYTES / 1e9


def _fits(
    tier: TierSpec, model: ModelSpec, kind: str, seq_len: int, batch_size: int, cluster: Cluster
) -> bool:
    memory_gb = GPUS[cluster.gpu].memory_gb
    if tier.fit == "comfortable":
        needed = _footprint_gb(model, kind, seq_len, batch_size, cluster.count, compact=False)
        return needed <= _COMFORTABLE_FRACTION * memory_gb
    needed = _footprint_gb(model, kind, seq_len, batch_size, cluster.count, compact=True)
    return needed <= _POSSIBLE_FRACTION * memory_gb


def _job_name(rng: random.Random, kind: str, taken: set[str]) -> str:
    free = [name for name in _JOB_NAMES[kind] if name not in taken]
    if free:
        return rng.choice(free)
    base = rng.choice(_JOB_NAMES[kind])
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def _draw_job(
    rng: random.Random,
    tier: TierSpec,
    cluster: Cluster,
    kind: str,
    models: tuple[str, ...],
    job_id: str,
) -> Job | None:
    """A job of ``kind`` whose model, context and batch pass the tier's fit filter, or None."""
    for _ in range(_JOB_ATTEMPTS):
        name = rng.choice(models)
        model = MODELS[name]
        seq_lens = [s for s in tier.seq_lens if s <= model.max_position_embeddings]
        if not seq_lens:  # gpt2: 1024-token window
            limit = model.max_position_embeddings
            seq_lens = [limit // 4, limit // 2, limit]
        seq_len = rng.choice(seq_lens)
        batch_size = rng.choice(tier.serve_batch_sizes if kind == "serve" else tier.train_batch_sizes)
        max_quality_loss = None
        prompt_len = 0
        if kind == "serve":
            if rng.random() < tier.quality_tolerance_prob:
                max_quality_loss = rng.choice(tier.quality_tolerances)
            prompt_len = min(round(rng.choice(tier.prompt_fractions) * seq_len), seq_len - 1)
        if _fits(tier, model, kind, seq_len, batch_size, cluster):
            return Job(
                id=job_id,
                model=name,
                kind=kind,
                priority=rng.choice(tier.priorities),
                seq_len=seq_len,
                batch_size=batch_size,
                max_quality_loss=max_quality_loss,
                prompt_len=prompt_len,
            )
    return None


def _draw(rng: random.Random, tier: TierSpec, split: str) -> Scenario | None:
    """One attempt at a scenario; None when a constraint fails (the caller draws again)."""
    held_out = "none"
    if split == "eval":
        held_out = rng.choice(("gpu", "model"))

    def allowed(names: tuple[str, ...], held: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(name for name in names if name not in held) if split == "train" else names

    # Cluster.
    if held_out == "gpu":
        gpu = rng.choice([g for g in HELD_OUT_GPUS if g in tier.gpus + tier.budget_gpus])
    elif rng.random() < tier.budget_gpu_prob:
        gpu = rng.choice(allowed(tier.budget_gpus, HELD_OUT_GPUS))
    else:
        gpu = rng.choice(allowed(tier.gpus, HELD_OUT_GPUS))
    cluster = Cluster(gpu=gpu, count=rng.randint(*tier.gpu_count))

    # Job shapes: kind and model class.
    job_count = rng.randint(*tier.job_count)
    large = [rng.random() < tier.large_model_prob for _ in range(job_count)]
    if sum(large) < tier.min_large_jobs:
        return None
    kinds = [rng.choice(tier.large_model_kinds if big else tier.kinds) for big in large]
    if tier.mixed_kinds and job_count > 1 and len(set(kinds)) == 1:
        return None
    held_model_job = -1
    if held_out == "model":
        small_jobs = [index for index, big in enumerate(large) if not big]
        if not small_jobs:
            return None
        held_model_job = rng.choice(small_jobs)

    small_models = allowed(tier.small_models, HELD_OUT_MODELS)
    large_models = allowed(tier.large_models, HELD_OUT_MODELS)
    jobs: list[Job] = []
    taken: set[str] = set()
    for index, (kind, big) in enumerate(zip(kinds, large, strict=True)):
        if index == held_model_job:
            models = HELD_OUT_MODELS
        elif big:
            models = large_models
        elif rng.random() < tier.gpt2_prob:
            models = ("gpt2",)
        else:
            models = small_models
        job_id = _job_name(rng, kind, taken)
        job = _draw_job(rng, tier, cluster, kind, models, job_id)
        if job is None:
            return None
        taken.add(job_id)
        jobs.append(job)
    return Scenario(cluster=cluster, jobs=tuple(jobs))


def make_scenario(task: str, seed: int, split: str = "train") -> Scenario:
    """Scenario number ``seed`` of tier ``task`` in ``split``; a pure function of its three arguments, so it
    is memoised: drawing the floors enumerates each job's options (~10 ms), which an environment server
    would otherwise pay on every ``reset`` of a scenario it has seen."""
    if task not in TIERS:
        raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    return _drawn_scenario(TIERS[task], task, _checked_seed(seed), _checked_split(split))


@functools.lru_cache(maxsize=8192)  # a Scenario is a small frozen struct: ~8k of them is a few MB
def _drawn_scenario(tier: TierSpec, task: str, seed: int, split: str) -> Scenario:
    """``draw_scenario``, memoised; the (frozen, hashable) tier is part of the key, so a tier changed at run
    time (a what-if, a test) never gets another tier's scenario."""
    return draw_scenario(tier, task, seed, split)


def _checked_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def _checked_seed(seed: int) -> int:
    """``seed`` as a plain int: ints and numpy integers; refuses bools, floats and strings."""
    if isinstance(seed, bool):
        raise TypeError("seed must be an int, got bool")
    return operator.index(seed)


def draw_scenario(tier: TierSpec, task: str, seed: int, split: str = "train") -> Scenario:
    """Scenario number ``seed`` drawn from ``tier``, its random stream named by ``task``: a tier changed only
    in its floors gives the same clusters and jobs as ``TIERS[task]``, which is how a what-if on a tier
    (``benchmarks/reward/templates.py --floor_prob``) runs before the tier is committed."""
    split, seed = _checked_split(split), _checked_seed(seed)
    rng = random.Random(f"fleet_rl/{task}/{split}/{seed}")
    for _ in range(_SCENARIO_ATTEMPTS):
        scenario = _draw(rng, tier, split)
        if scenario is not None and _every_job_can_run(scenario):
            return _with_floors(rng, tier, scenario)
    raise RuntimeError(f"no {task!r} scenario satisfied the tier constraints for seed {seed}; check TIERS")


def _every_job_can_run(scenario: Scenario) -> bool:
    """The kernel's word, after the rough ``_fits`` filter: every job has some plan that runs (``ok``) when it
    has the whole cluster. The solve goes to the cache of solved scenarios, so scoring this scenario later
    (by its JSON, the dataset column) costs nothing extra."""
    from fleet_rl.solved_scenarios import solved_scenario  # the kernel imports the catalog, not this module

    return bool(np.isfinite(solved_scenario(scenario).reference_tokens_per_s).all())


def _with_floors(rng: random.Random, tier: TierSpec, scenario: Scenario) -> Scenario:
    """``scenario`` with throughput floors drawn per the tier (``floor_prob``, ``floor_fractions``). A floor
    is a fraction (at most 1) of the best tokens/s the job makes alone on its *even share* of the cluster
    (count ÷ jobs GPUs, or the fewest GPUs above that at which it runs): so a fair split can meet every
    floor with the right settings, while a careless one misses them. Draws nothing when ``floor_prob`` is
    0."""
    if tier.floor_prob <= 0.0:
        return scenario
    from fleet_rl.kernel.solver import enumerate_job_options
    from fleet_rl.solved_scenarios import solved_scenario

    table = solved_scenario(scenario).table
    share = max(1, scenario.cluster.count // len(scenario.jobs))
    jobs = []
    for j, job in enumerate(scenario.jobs):
        if rng.random() < tier.floor_prob:
            options, _ = enumerate_job_options(table, j)
            basis = max(share, int(options.rows.gpus[options.ok].min()))  # every job runs on the cluster
            best = float(options.tokens_per_s[options.ok & (options.rows.gpus <= basis)].max())
            floor = _two_digits_down(rng.choice(tier.floor_fractions) * best)
            job = msgspec.structs.replace(job, min_tokens_per_s=floor)
        jobs.append(job)
    return _floors_met_together(Scenario(cluster=scenario.cluster, jobs=tuple(jobs)))


def _floors_met_together(scenario: Scenario) -> Scenario:
    """``scenario`` without the floors its optimum misses, until the optimum meets every floor left. A job
    that needs more than its even share to run at all can leave too few GPUs for the others' floors; a
    generated scenario is never one where every plan misses a floor (its optimum would be ≤ 0)."""
    from fleet_rl.solved_scenarios import solved_scenario

    while True:
        idle = solved_scenario(scenario).optimal_gpus == 0
        missed = [j for j, job in enumerate(scenario.jobs) if job.min_tokens_per_s is not None and idle[j]]
        if not missed:
            return scenario
        jobs = tuple(
            msgspec.structs.replace(job, min_tokens_per_s=None) if j in missed else job
            for j, job in enumerate(scenario.jobs)
        )
        scenario = Scenario(cluster=scenario.cluster, jobs=jobs)


def _two_digits_down(value: float) -> float:
    """``value`` rounded down to 2 significant digits (15,516.3 → 15,000.0): a round figure, never above."""
    step = 10.0 ** (math.floor(math.log10(value)) - 1)
    return float(f"{math.floor(value / step) * step:.2g}")
