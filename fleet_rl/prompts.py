"""Chat prompts for a scenario: what the policy reads before it writes a plan (DESIGN.md §3-§5).

``build_messages(scenario)`` returns TRL's conversational prompt format, ``[{"role": "system", ...},
{"role": "user", ...}]``. The system message states the task, the plan schema, the rules the kernel applies
and the physics the model may reason with (byte counts, memory formulas, formats each GPU supports, the
objective), plus one worked example. The user message lists the cluster and the jobs with the facts that
matter for each (parameters, layers, KV bytes per token, the GPU's memory and peak rates). Nothing in it
is derived from the optimum: no "best" GPU split, no recommended precision. Print one with
``python -m fleet_rl.prompts medium 7``.

The worked example is ``EXAMPLE_SCENARIO`` and its exact optimum ``example_plan()``. Its job ids
(``example-chat``, ``example-tune``) are never drawn by the generator, so copying the example answer verbatim
names jobs the scenario does not have (the IRD "invented id" rule), and copying it under the scenario's ids
(whole, or one job of it) is caught by the IRD "copied example" rule, ``rewards/copied_example.py``.

Multi-agent prompts (``agent=<job id>``, ``given_plan=<the other jobs' parts>``) ask one job's agent for its
own part only, ``{"jobs": [<its job>]}``; the reward merges it with the given parts before scoring.

Eight styles:

- ``"full"`` (default; for instruction-tuned LLMs): the schema, the rules and physics, a worked example, and
  the scenario's facts.
- ``"facts"`` (for small models such as SmolLM2-135M on a CPU): the schema, a few lines of the rules a planner
  cannot do without (bytes per parameter per format, what int8/int4 are for, that a job over memory
  crashes) and the same user message as ``full``, every figure of the GPU, the jobs and their models. No
  worked example: ~650 prompt tokens instead of ~1,700, and a policy tested on GPUs and models it never
  saw in training can still size a job from figures (DESIGN.md §4, "Prompts state every fact").
- ``"sized"`` (small models, issue #43): ``facts`` plus, per job, the smallest tensor parallelism at which
  one replica fits in memory for each weight format the job and GPU allow (``fleet_rl/replica_fit.py``: the
  kernel's memory verdict, as an engineer reads a memory calculator; never the optimum). A policy that has
  not learnt the memory arithmetic can still avoid a crash by comparing the plan's tensor_parallel with a
  number the prompt states.
- ``"sized_batching"`` (issue #68): ``sized`` whose train/lora Fits entries also say how the replica
  batches at that tensor parallelism: the largest micro_batch_size that fits without
  activation_checkpointing, or that it fits only with it. An imitator of the heuristic on ``sized`` wrote
  ``"activation_checkpointing": false`` at the stated tensor parallelism, where the prompt promised a fit
  only with checkpointing, in 23 of its 31 out-of-memory jobs on the 96 held-out scenarios
  (``python -m benchmarks.learning.fault_causes``).
- ``"sized_batching_kinds"`` (issue #68): ``sized_batching`` whose last line names each job's kind beside
  its id, "in this order: finetune (train), translate (serve)", where the policy copies the id from. An
  imitator of the heuristic on ``sized_batching`` wrote a serve job's kv_cache for 22 of its 111 placed
  train/lora jobs and a training job's keys for 17 of its 52 placed serve jobs on the 96 held-out
  scenarios: the kind sits in a job line hundreds of tokens back (``python -m
  benchmarks.learning.fault_causes``, ``keys_by_kind``). Measured, not adopted: the same SFT on this style
  mixes the kinds less but scores 34.6 % of the optimum against 36.6 % (docs/experiment-log.md).
- ``"sized_batching_floors"`` (issue #68): ``sized_batching`` whose Fits entries, for a job with a
  ``min_tokens_per_s``, also say the fewest GPUs at which that format meets the floor (the kernel's
  throughput verdict on the job alone, ``fleet_rl/floor_fit.py``, as the Fits entry is its memory
  verdict). An imitator of the heuristic on ``sized_batching`` got the GPU split wrong more than any other
  field, and the heuristic gives a job with a floor the fewest replicas that meet it, a figure no other
  style states. Measured, not adopted: the same SFT on this style scores 32.9 % of the optimum against
  36.6 % (docs/experiment-log.md).
- ``"sized_batching_brief"`` (issue #68): ``sized_batching``'s user message under a short system message:
  the task, the answer's keys in one sentence and what the Fits entries mean, without the schema's value
  lists and the memory rules (209 tokens against 572). A model that learns the answer from hundreds of
  the heuristic's plans reads its figures from the user message; the system message is the same for every
  prompt, and on a CPU every token of it costs each SFT example, each GRPO answer's loss and each held-out
  answer again.
- ``"compact"`` (the tiny random test model, whose context is small): the schema and the scenario JSON. It
  names the GPU and the models but gives none of their figures, so a policy can only learn names by heart;
  kept for the tests and for comparison with earlier results.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Literal, get_args

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.floor_fit import floor_gpus
from fleet_rl.kernel.constants import UTILITY_EXPONENT
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, SHARDINGS, TENSOR_PARALLEL_SIZES
from fleet_rl.replica_fit import ReplicaFit, replica_fits
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = [
    "EXAMPLE_SCENARIO",
    "PROMPT_STYLES",
    "build_messages",
    "example_plan",
    "format_answer",
    "system_prompt",
    "user_prompt",
]

PromptStyle = Literal[
    "full",
    "facts",
    "sized",
    "sized_batching",
    "sized_batching_kinds",
    "sized_batching_floors",
    "sized_batching_brief",
    "compact",
]
PROMPT_STYLES: tuple[str, ...] = get_args(PromptStyle)
_BATCHING_STYLES = ("sized_batching", "sized_batching_kinds", "sized_batching_floors", "sized_batching_brief")

EXAMPLE_SCENARIO = Scenario.from_dict(
    {
        "cluster": {"gpu": "a100-80gb", "count": 4},
        "jobs": [
            {"id": "example-chat", "model": "mistral-7b", "kind": "serve", "priority": 2, "seq_len": 2048,
             "batch_size": 16},
            {"id": "example-tune", "model": "llama-3.1-8b", "kind": "lora", "priority": 1, "seq_len": 1024,
             "batch_size": 8},
        ],
    }
)  # fmt: skip


@functools.cache
def example_plan() -> dict:
    """The worked example's answer: the kernel's exact optimum for ``EXAMPLE_SCENARIO`` (computed once)."""
    from fleet_rl.kernel import solve  # the kernel imports scenarios, not prompts

    return solve(EXAMPLE_SCENARIO).plan


def format_answer(plan: Mapping) -> str:
    """A plan as the assistant should write it: one compact JSON object in a ```json fence."""
    return "```json\n" + json.dumps(plan, separators=(",", ":")) + "\n```"


_GROUP_FIELDS = ", ".join(f'"{group}": <fmt>' for group in MODULE_GROUPS)
_TP_CHOICES = "|".join(map(str, TENSOR_PARALLEL_SIZES))
_SCHEMA_TEXT = f"""\
Answer with one JSON object and nothing after it:
{{"jobs": [{{"id": <job id>, "gpus": <int >= 0>, "tensor_parallel": <{_TP_CHOICES}>,
  "precision": {{{_GROUP_FIELDS}}},
  "micro_batch_size": <{"|".join(map(str, MICRO_BATCH_SIZES))}>, "activation_checkpointing": <true|false>,
  "sharding": <{"|".join(SHARDINGS)}>, "kv_cache": <fmt>}}, ...]}}
<fmt> is one of {", ".join(PRECISIONS)}. One entry per job, ids exactly as given. micro_batch_size,
activation_checkpointing and sharding (default none) apply to train/lora jobs, kv_cache to serve jobs
(default: 16-bit); omit the others."""

_RULES_TEXT = f"""\
Rules the simulator applies:
- GPUs: the jobs' "gpus" must sum to at most the cluster's count; a job with 0 GPUs does not run. Each job's
  tensor_parallel must divide its gpus and the model's attention and KV heads; gpus/tensor_parallel
  replicas run data-parallel.
- Formats: fp32/bf16/fp16/fp8 are compute formats and need GPU support (listed per GPU below). int8/int4 are
  weight-only formats for frozen weights (serve jobs, the frozen base of a lora job); weights being trained
  (train jobs) cannot be int8/int4. In training, fp8 is only safe for attention and mlp GEMMs: fp8
  embedding, norm or lm_head diverges. Norms must stay at 16 bits or more in every kind of job.
- Quality: lower precision costs quality, most in lm_head, least in embedding; int4 costs far more than
  fp8/int8. A serve job with max_quality_loss is unstable (worthless) above it.
- Memory per GPU must fit: weights (bytes/param fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.52) divided by
  tensor_parallel. train jobs hold 16 bytes/param of Adam state / tensor_parallel; lora jobs add rank-16
  adapters. sharding splits training state over the replicas: optimizer (ZeRO-2) shards 14 of the 16
  bytes, full (ZeRO-3/FSDP) all 16 and the frozen base too, at the cost of more communication.
  Activations per layer: (10 + 24/tensor_parallel) x seq_len x micro_batch x hidden bytes; with
  activation_checkpointing about 2 x seq_len x micro_batch x hidden per layer plus one layer's working
  set, for ~1/3 more compute. A serve job holds the KV cache of its
  replica's share of batch_size sequences (KV bytes/token x seq_len, at the kv_cache format, divided by
  tensor_parallel up to the KV heads). Plus 0.5 GB per GPU. A job over capacity crashes (oom), earns nothing.
- Speed: training is compute-bound (6 FLOPs/param/token at the GEMM format's peak), decoding is
  memory-bound (weights + KV cache read per step, int8/int4 weights dequantised on the way, plus a fixed
  cost per layer); tensor parallelism adds all-reduce time, so small-batch decode gains little from it.
  A serve job with prompt_len also prefills that many tokens per request (compute-bound: fp8 weights
  speed it up, int8/int4 weights do not) before generating seq_len - prompt_len.
- A job with min_tokens_per_s must make at least that many tokens/s across its GPUs. If it does not
  (too_slow, crashed or idle) it misses its SLO, which costs its priority: give it enough GPUs and fast
  enough formats before the others get more.
- Objective: sum over running jobs of priority × (tokens/s ÷ the job's best tokens/s alone on the
  cluster)^{UTILITY_EXPONENT:g} × (1 − 4 × quality loss), minus a small power cost. So every job that
  can run should get GPUs, and the split should follow priority and how well each job uses more GPUs."""


# The few rules of the "facts" style: what memory a plan needs and what crashes it (from _RULES_TEXT).
_ESSENTIAL_RULES_TEXT = """\
Rules: gpus sum to at most the cluster's count; tensor_parallel divides gpus and the heads. Use only the
GPU's formats. int8/int4 are weight-only: serve jobs and a lora job's base, never train jobs. Memory per
GPU: params x bytes (fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.52) / tensor_parallel; train: +16 bytes/param
Adam / tensor_parallel; activations grow with seq_len x micro_batch_size (activation_checkpointing cuts
them); serve: + KV cache of its share of batch_size. Over the GPU's memory: oom, the job earns nothing."""

# The "sized_batching_brief" style's answer format: the schema's keys in one sentence, no value lists.
_BRIEF_SCHEMA_TEXT = """\
Answer with one JSON object in a ```json fence, one entry per job, ids exactly as given: {"jobs": [{"id",
"gpus", "tensor_parallel", "precision": {<module group>: <format>}, then micro_batch_size and
activation_checkpointing (train/lora) or kv_cache (serve)}, ...]}. The jobs' gpus sum to at most the
cluster's count; tensor_parallel divides gpus."""
# ... and what its Fits entries mean, in one sentence (_FITS_TEXT and _BATCHING_TEXT at length).
_BRIEF_FITS_TEXT = """\
"Fits": per format, the smallest tensor_parallel at which one replica fits in memory (a smaller one
crashes, oom); for train/lora, the largest micro_batch_size that fits there without
activation_checkpointing, or that it fits only with it."""

# What the "sized" styles' per-job "Fits" line means (fleet_rl/replica_fit.py).
_FITS_TEXT = """\
"Fits" lists, per format (attention and mlp in it, the other groups 16-bit, the KV cache 8-bit below 16),
the smallest tensor_parallel at which one replica (gpus = tensor_parallel; train/lora at micro_batch_size 1
with activation_checkpointing) fits in memory. A smaller tensor_parallel at that format crashes (oom)."""
# What the "sized_batching" style adds to it.
_BATCHING_TEXT = """\
For train/lora it then says the largest micro_batch_size that fits at that tensor_parallel without
activation_checkpointing, or that it fits only with activation_checkpointing."""
# What the "sized_batching_kinds" style adds to that.
_KINDS_TEXT = """\
The last line names each job's kind after its id: a serve job's entry takes kv_cache, a train or lora
job's micro_batch_size and activation_checkpointing."""
# What the "sized_batching_floors" style adds to "sized_batching" (fleet_rl/floor_fit.py).
_FLOORS_TEXT = """\
For a job with min_tokens_per_s, each format then says the fewest GPUs (whole replicas at that
tensor_parallel and batching, the job alone on the cluster) at which it meets min_tokens_per_s; on fewer
it is too slow and earns nothing."""


def _example_text() -> str:
    return (
        "Example (a different cluster and jobs; do not copy its numbers):\n"
        f"Scenario: {EXAMPLE_SCENARIO.to_json()}\n"
        f"Answer:\n{format_answer(example_plan())}"
    )


@functools.cache
def system_prompt(style: PromptStyle = "full") -> str:
    """The system message: task, schema, rules and physics, worked example (``full``); task, schema and the
    essential rules (``facts``); or task and schema (``compact``)."""
    _check_style(style)
    intro = (
        "You plan GPU clusters. Given a cluster and the jobs that must share it, assign each job GPUs, "
        "tensor parallelism, a numeric format per module group and its batching, to maximise the cluster "
        "objective."
    )
    if style == "compact":
        return f"{intro}\n{_SCHEMA_TEXT}"
    if style == "facts":
        return f"{intro}\n{_SCHEMA_TEXT}\n{_ESSENTIAL_RULES_TEXT}"
    if style == "sized":
        return f"{intro}\n{_SCHEMA_TEXT}\n{_ESSENTIAL_RULES_TEXT}\n{_FITS_TEXT}"
    if style == "sized_batching_brief":
        return f"{intro}\n{_BRIEF_SCHEMA_TEXT}\n{_BRIEF_FITS_TEXT}"
    if style in _BATCHING_STYLES:
        extra = {"sized_batching_kinds": f"\n{_KINDS_TEXT}", "sized_batching_floors": f"\n{_FLOORS_TEXT}"}
        return (
            f"{intro}\n{_SCHEMA_TEXT}\n{_ESSENTIAL_RULES_TEXT}\n{_FITS_TEXT}\n{_BATCHING_TEXT}"
            + extra.get(style, "")
        )
    answer_style = "Think briefly if you need to, then give the JSON answer in a ```json fence."
    return f"{intro}\n\n{_SCHEMA_TEXT}\n{answer_style}\n\n{_RULES_TEXT}\n\n{_example_text()}"


def _gpu_line(scenario: Scenario) -> str:
    gpu = scenario.gpu
    formats = [p for p in PRECISIONS if gpu.supports(p)]
    peaks = ", ".join(f"{p} {tflops:g}" for p, tflops in gpu.dense_tflops.items())
    return (
        f"Cluster: {scenario.cluster.count} x {gpu.name}, {gpu.memory_gb:.1f} GB each, "
        f"{gpu.memory_bandwidth_gb_s:g} GB/s memory, dense TFLOPS {peaks}, {gpu.interconnect} "
        f"{gpu.interconnect_gb_s:g} GB/s; formats: {', '.join(formats)}."
    )


def _job_line(job) -> str:
    model = job.model_spec
    experts = (
        f", {model.num_experts} experts ({model.experts_per_token} active)" if model.num_experts > 1 else ""
    )
    tolerance = f", max_quality_loss {job.max_quality_loss:g}" if job.max_quality_loss is not None else ""
    prompt = f", prompt_len {job.prompt_len}" if job.prompt_len else ""
    floor = f", min_tokens_per_s {job.min_tokens_per_s:g}" if job.min_tokens_per_s is not None else ""
    return (
        f"- {job.id}: {job.kind} {job.model} (priority {job.priority:g}), seq_len {job.seq_len}{prompt}, "
        f"batch_size {job.batch_size}{tolerance}{floor}. "
        f"Model: {model.num_params / 1e9:.2f} B params{experts}, {model.num_layers} layers, "
        f"hidden {model.hidden_size}, {model.num_attention_heads} heads ({model.num_key_value_heads} KV), "
        f"KV cache {model.kv_cache_bytes_per_token(2.0) / 1024:g} KiB/token at 16 bits."
    )


def _fits_line(fits: list[ReplicaFit], training: bool, floors: list[int | None] | None = None) -> str:
    """A job's fits as the ``sized`` style words them: "Fits: bf16 tp 4; fp8 tp 2; int4 tp 1"; with
    ``training`` (a train/lora job in the ``sized_batching`` styles) each also says how it batches there:
    "bf16 tp 2, micro_batch_size 4 without checkpointing; fp8 tp 1, only with activation_checkpointing";
    with ``floors`` (a job with a floor in the ``sized_batching_floors`` style) each that fits then says the
    fewest GPUs that meet it: "bf16 tp 1, meets min_tokens_per_s at 3 GPUs"."""
    words = {"oom": "none (oom)", "quality": "none (over max_quality_loss)"}
    entries = [_fit_words(fit, words, training) for fit in fits]
    if floors is not None:
        entries = [
            entry if fit.tensor_parallel is None else f"{entry}, {_floor_words(gpus)}"
            for entry, fit, gpus in zip(entries, fits, floors, strict=True)
        ]
    return "  Fits: " + "; ".join(entries) + "."


def _floor_words(gpus: int | None) -> str:
    if gpus is None:
        return "too slow for min_tokens_per_s on every GPU count"
    return f"meets min_tokens_per_s at {gpus} GPU{'s' if gpus > 1 else ''}"


def _fit_words(fit: ReplicaFit, words: dict[str, str], training: bool) -> str:
    if not fit.tensor_parallel:
        return f"{fit.fmt} {words[fit.reason]}"
    if not training:
        return f"{fit.fmt} tp {fit.tensor_parallel}"
    if fit.micro_batch_size is None:
        return f"{fit.fmt} tp {fit.tensor_parallel}, only with activation_checkpointing"
    batching = f"micro_batch_size {fit.micro_batch_size} without checkpointing"
    return f"{fit.fmt} tp {fit.tensor_parallel}, {batching}"


def _whole_plan_request(scenario: Scenario, kinds: bool = False) -> str:
    """The user message's last line: every job the plan must list, by id, in the scenario's order; with
    ``kinds``, each id followed by its job's kind, "finetune (train)".

    Why: a small policy decides at the end of each job's entry whether the list goes on, and without this
    line only the job lines hundreds of tokens back tell it how many entries remain; naming the ids right
    before the answer lets it copy the next one (issue #68: policies named the first job alone). The kind
    beside the id it copies decides which keys the entry takes (``sized_batching_kinds``)."""
    ids = [f"{job.id} ({job.kind})" for job in scenario.jobs] if kinds else scenario.job_ids
    if len(ids) == 1:
        return f"Write the plan for its one job: {ids[0]}."
    return f"Write the plan for all {len(ids)} jobs, one entry each, in this order: {', '.join(ids)}."


def user_prompt(
    scenario: Scenario,
    *,
    agent: str | None = None,
    given_plan: Mapping | None = None,
    style: PromptStyle = "full",
) -> str:
    """The user message for ``scenario``; with ``agent``, a request for that job's part given the others'."""
    _check_style(style)
    if agent is not None and agent not in scenario.job_ids:
        raise ValueError(f"agent {agent!r} is not a job of the scenario; jobs: {', '.join(scenario.job_ids)}")
    if style == "compact":
        lines = [f"Scenario: {scenario.to_json()}"]
    elif style == "sized" or style in _BATCHING_STYLES:
        solved = solved_scenario(scenario)
        fits = replica_fits(solved)
        lines = [_gpu_line(scenario), "Jobs:"]
        for job in scenario.jobs:
            training = style != "sized" and job.kind != "serve"
            with_floor = style == "sized_batching_floors" and job.min_tokens_per_s is not None
            floors = floor_gpus(solved, job, fits[job.id]) if with_floor else None
            lines += [_job_line(job), _fits_line(fits[job.id], training=training, floors=floors)]
    else:
        lines = [_gpu_line(scenario), "Jobs:", *(_job_line(job) for job in scenario.jobs)]
    if agent is None:
        lines.append(_whole_plan_request(scenario, kinds=style == "sized_batching_kinds"))
        return "\n".join(lines)
    given_jobs = [job for job in (given_plan or {}).get("jobs", []) if job.get("id") != agent]
    taken = sum(int(job.get("gpus", 0)) for job in given_jobs)
    lines += [
        f"You are the agent of job {agent}. The other jobs' parts are fixed: "
        + json.dumps({"jobs": given_jobs}, separators=(",", ":")),
        f"GPUs not taken by them: {scenario.cluster.count - taken}. Write only your job's part, as "
        f'{{"jobs": [{{"id": "{agent}", ...}}]}}.',
    ]
    return "\n".join(lines)


def build_messages(
    scenario: Scenario,
    *,
    agent: str | None = None,
    given_plan: Mapping | None = None,
    style: PromptStyle = "full",
) -> list[dict[str, str]]:
    """TRL conversational prompt: ``[system, user]`` messages for ``scenario`` (see ``user_prompt``)."""
    return [
        {"role": "system", "content": system_prompt(style)},
        {"role": "user", "content": user_prompt(scenario, agent=agent, given_plan=given_plan, style=style)},
    ]


def _check_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; valid styles: {', '.join(PROMPT_STYLES)}")


def _main() -> None:
    import sys

    from fleet_rl.scenario_generator import make_scenario

    task = sys.argv[1] if len(sys.argv) > 1 else "medium"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for message in build_messages(make_scenario(task, seed)):
        print(f"--- {message['role']}\n{message['content']}")


if __name__ == "__main__":
    _main()
