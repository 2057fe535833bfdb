"""Learning benchmark: does GRPO improve the policy it starts from? A paired comparison on held-out scenarios.

    python benchmarks/learning.py --config configs/smollm2_cpu.yaml --seeds 0 1 --eval_scenarios 96 \\
        --output benchmarks/results/learning_smollm2_cpu.json [extra train_grpo.py flags ...]
    python benchmarks/learning.py --render benchmarks/results/learning_smollm2_cpu.json   # the README table
    python benchmarks/learning.py --fingerprint --config configs/smollm2_cpu.yaml  # its scenario_fingerprint

For each training seed it runs ``train_grpo.main`` with the preset, the seed and the extra flags (any
``train_grpo.py`` flag: ``--max_steps 60``, ``--sft_target random``...). The **start policy** is what GRPO
starts from: the preset's SFT warm start if it has one (``sft_steps > 0``; trained with the same seed, so it
differs between seeds), else the base model (the same for every seed, so it is evaluated once). The
**after policy** is the start plus the trained LoRA adapter. Both are loaded the way GRPO loaded its policy
(``fleet_rl.training.backends.load_policy``: same dtype, same 4-bit NF4 base when the preset quantises) and
answer the same held-out scenarios (``split="eval"``, ``fleet_rl.training.heldout``) greedily, in batches,
with the same token budget (the preset's ``max_completion_length``); the training rewards score them.

Statistics, per metric (mean % of optimum with IRD plans counted as 0, valid-plan, feasible and IRD rates,
mean fleet_reward): per scenario, the after − start difference averaged over seeds; its mean over scenarios
(``delta_percent_points`` for % of optimum) and a 95 % percentile bootstrap interval that resamples
scenarios (10,000 resamples, ``numpy.random.default_rng(0)``); plus each seed's own mean difference. The
interval covers scenario sampling; with few seeds it says little about seed-to-seed variance, which the
per-seed differences show.

Beside the policies, the ``baselines`` (``BASELINE_NAMES`` of ``fleet_rl.baselines``, no model: each answers
a row seeded by its generator seed, as ``eval.py``'s baselines do) are scored on the same held-out rows.

The result's ``scenario_fingerprint`` (``benchmarks/scenario_fingerprint.py``) hashes the held-out prompts,
their optima and the rewards of a fixed panel of plans on them; ``--fingerprint`` prints today's on its last
line and trains nothing, so a stored result can be told stale from current.

Also recorded: the training reward curve of each seed (``reward`` and ``rewards/<name>/mean`` per logged
step, from ``trainer_state.json``), wall time (warm start; GRPO split into generation, reward and the rest
of the step — forward, backward and optimizer, plus checkpoint saves — from the timings TRL's
``profiling_context`` takes around ``transformers.generate`` and ``_calculate_rewards``; evaluation), the
exact command, CPU, package versions and git commit. A start that imitated the exact optimum
(``sft_target: optimal``) is flagged ``fair_start: false``: such a run says nothing about what RL learned.

``--reuse`` keeps a seed's finished result from an earlier run of the same command in ``--work_dir``, if it
was evaluated on today's held-out scenarios (the same ``scenario_fingerprint``; otherwise it says so and
trains the seed afresh); without it each seed's directory there is cleared and trained afresh.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import gc
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(
        0, str(REPO)
    )  # train_grpo.py and the packages, when run as `python benchmarks/learning.py`

__all__ = [
    "BASELINE_NAMES",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "METRICS",
    "baseline_summaries",
    "eval_settings",
    "main",
    "paired_difference",
    "print_fingerprint",
    "render",
    "run",
    "today_scenario_fingerprint",
]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
# metric -> (heldout summary key, label in the table, digits)
METRICS: dict[str, tuple[str, str, int]] = {
    "percent_of_optimum": ("mean_percent_of_optimum", "mean % of optimum", 1),
    "valid_plan_rate": ("valid_plan_rate", "valid plan", 2),
    "feasible_rate": ("feasible_rate", "feasible", 2),
    "ird_rate": ("ird_rate", "IRD", 2),
    "fleet_reward": ("mean_fleet_reward", "mean fleet_reward", 3),
}
BASELINE_NAMES = ("even_bf16", "heuristic", "random_feasible")  # planners scored beside the policies
# train_grpo.py flags the benchmark sets itself
OWN_TRAIN_FLAGS = ("--seed", "--output_dir", "--eval_scenarios", "--report_to")
SEED_RESULT = "learning_seed.json"


# --- statistics ---------------------------------------------------------------------------------------


def paired_difference(
    start: np.ndarray,
    after: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> dict:
    """Mean paired difference ``after - start`` with a percentile bootstrap interval over scenarios.

    ``start`` and ``after`` are (seeds, scenarios) arrays of one metric on the same scenarios. Each
    scenario's difference is averaged over seeds; the bootstrap resamples scenarios with replacement
    ``resamples`` times (``numpy.random.default_rng(seed)``). Returns ``mean``, ``ci95`` ([low, high]) and
    ``per_seed`` (each seed's mean difference)."""
    start, after = np.atleast_2d(np.asarray(start, float)), np.atleast_2d(np.asarray(after, float))
    if start.shape != after.shape or start.shape[1] == 0:
        raise ValueError(f"paired arrays must have one equal (seeds, scenarios) shape, got {start.shape}")
    differences = after - start  # (seeds, scenarios)
    per_scenario = differences.mean(axis=0)  # (scenarios,)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for first in range(0, resamples, 1000):  # chunks bound the index array at 1000 x scenarios
        count = min(1000, resamples - first)
        picks = rng.integers(0, per_scenario.size, size=(count, per_scenario.size))
        means[first : first + count] = per_scenario[picks].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return {
        "mean": float(per_scenario.mean()),
        "ci95": [float(low), float(high)],
        "per_seed": [float(value) for value in differences.mean(axis=1)],
    }


# --- evaluation ---------------------------------------------------------------------------------------


def per_scenario_metrics(rows: Sequence[dict], completions: Sequence[str]) -> dict[str, list[float]]:
    """Each metric of ``METRICS`` per scenario, scored like ``fleet_rl.training.heldout.summarise``."""
    from rewards import fleet_reward, score_completions

    columns = {"agent": [row["agent"] for row in rows], "given_plan": [row["given_plan"] for row in rows]}
    scenarios = [row["scenario"] for row in rows]
    scores = score_completions(list(completions), scenarios, **columns)
    rewards = np.asarray(fleet_reward(list(completions), scenarios, **columns), dtype=float)
    return {
        "percent_of_optimum": (100.0 * np.where(scores.ird, 0.0, scores.score)).tolist(),
        "valid_plan_rate": scores.has_plan.astype(float).tolist(),
        "feasible_rate": scores.feasible.astype(float).tolist(),
        "ird_rate": scores.ird.astype(float).tolist(),
        "fleet_reward": rewards.tolist(),
    }


def load_for_eval(base: str, adapter: str | None, script_args, training_args, model_args):
    """(model, tokenizer) loaded as GRPO loaded its policy (transformers backend: same dtype, same
    quantisation), with the trained LoRA ``adapter`` on top, or none (the start: LoRA at zero)."""
    from trl.trainer.utils import create_model_from_path

    from fleet_rl.training.backends import load_policy

    script_args, training_args = copy.copy(script_args), copy.copy(training_args)
    script_args.backend = "transformers"  # Unsloth's 4-bit base is bitsandbytes NF4 as well
    training_args.model_init_kwargs = None  # load_policy fills it in
    policy = load_policy(base, script_args, training_args, model_args)
    kwargs = dict(training_args.model_init_kwargs)
    if policy["quantization_config"] is not None:
        kwargs["quantization_config"] = policy["quantization_config"]
    model = create_model_from_path(base, **kwargs)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    return model, policy["processing_class"]


def evaluate(base: str, adapter: str | None, settings: dict, parsed) -> dict:
    """Greedy answers of one policy on the held-out rows; per-scenario metrics, summary, wall time."""
    from fleet_rl.training.heldout import evaluate_policy

    started = time.perf_counter()
    model, tokenizer = load_for_eval(base, adapter, *parsed)
    report = evaluate_policy(
        model,
        tokenizer,
        num_scenarios=settings["eval_scenarios"],
        tasks=settings["eval_tasks"],
        prompt_style=settings["prompt_style"],
        max_new_tokens=settings["max_new_tokens"],
        batch_size=settings["eval_batch_size"],
        dataset_seed=settings["eval_dataset_seed"],
        num_samples=settings["eval_scenarios"],  # every answer, to score it per scenario
    )
    del model
    gc.collect()
    samples = report.pop("samples")
    rows = eval_rows(settings)
    if [(row["task"], row["seed"]) for row in rows] != [
        (sample["task"], sample["seed"]) for sample in samples
    ]:
        raise RuntimeError("the held-out answers do not line up with the held-out rows")
    completions = [sample["completion"] for sample in samples]
    return {
        "summary": report,
        "per_scenario": per_scenario_metrics(rows, completions),
        "samples": completions[:3],
        "wall_s": time.perf_counter() - started,
    }


def eval_rows(settings: dict) -> list[dict]:
    from fleet_rl.training.dataset import scenario_rows

    return scenario_rows(
        settings["eval_tasks"],
        settings["eval_scenarios"],
        dataset_seed=settings["eval_dataset_seed"],
        split="eval",
        prompt_style=settings["prompt_style"],
    )


def eval_settings(args: argparse.Namespace, script_args, training_args) -> dict:
    """What the held-out evaluation depends on: the benchmark's flags over the preset's (with its flags)."""
    return {
        "eval_scenarios": args.eval_scenarios,
        "eval_tasks": args.eval_tasks or list(script_args.tasks),
        "prompt_style": script_args.prompt_style,
        "max_new_tokens": args.max_new_tokens or training_args.max_completion_length,
        "eval_batch_size": args.eval_batch_size,
        "eval_dataset_seed": args.eval_dataset_seed,
    }


def today_scenario_fingerprint(settings: dict, rows: Sequence[dict] | None = None) -> str:
    """``benchmarks.scenario_fingerprint`` of the held-out rows of these settings (``rows``, if already
    drawn), with today's code."""
    from benchmarks.scenario_fingerprint import scenario_fingerprint

    return scenario_fingerprint(eval_rows(settings) if rows is None else rows)


def baseline_summaries(rows: Sequence[dict]) -> tuple[dict[str, dict], dict[str, list[float]]]:
    """Each of ``BASELINE_NAMES`` on the held-out rows, scored by the policies' code: its summary
    (``fleet_rl.training.heldout.summarise``: the ``METRICS`` keys, crash rates, per task) and its
    per-scenario % of optimum (``per_scenario_metrics``)."""
    from fleet_rl.baselines import BASELINES
    from fleet_rl.prompts import format_answer
    from fleet_rl.training.dataset import planner_answer
    from fleet_rl.training.heldout import summarise

    summaries, percents = {}, {}
    for name in BASELINE_NAMES:
        completions = [format_answer(planner_answer(BASELINES[name], row)) for row in rows]
        summaries[name] = {"policy": f"baseline {name}", **summarise(rows, completions)}
        percents[name] = per_scenario_metrics(rows, completions)["percent_of_optimum"]
    return summaries, percents


# --- training -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def trl_profiling_totals():
    """Sum the durations TRL's ``profiling_context`` measures (by name), while the block runs.

    GRPOTrainer times ``transformers.generate`` (or ``vLLM.generate``), ``_calculate_rewards``,
    ``compute_loss``... with ``trl.extras.profiling.ProfilingContext`` but only reports them to wandb,
    MLflow or Trackio; this records them too, without touching the trainer."""
    totals: dict[str, float] = collections.defaultdict(float)
    try:
        from trl.extras.profiling import ProfilingContext
    except ImportError:  # an older TRL without it: no split
        yield totals
        return
    original = ProfilingContext._log_metrics

    def record(self, duration: float) -> None:
        totals[self.name] += duration
        original(self, duration)

    ProfilingContext._log_metrics = record
    try:
        yield totals
    finally:
        ProfilingContext._log_metrics = original


def split_grpo_time(grpo_s: float, profiled: dict[str, float]) -> dict[str, float | None]:
    """GRPO wall time as generation, reward, and the rest (forward, backward, optimizer, saves)."""
    generation = sum(
        seconds
        for name, seconds in profiled.items()
        if name.endswith((".generate", ".generate_batch", ".sync_weights"))
    )
    reward = sum(seconds for name, seconds in profiled.items() if name.endswith("._calculate_rewards"))
    if not profiled:
        return {"generation": None, "reward": None, "backward": None}
    return {"generation": generation, "reward": reward, "backward": grpo_s - generation - reward}


def reward_curve(log_history: list[dict]) -> dict[str, list]:
    """Per logged training step: ``reward`` and every ``rewards/<name>/mean`` (plus the kernel rates)."""
    entries = [entry for entry in log_history if "reward" in entry]
    keys = ["reward"] + sorted(
        {
            key
            for entry in entries
            for key in entry
            if (key.startswith("rewards/") and key.endswith("/mean")) or key.startswith("kernel/")
        }
    )
    curve: dict[str, list] = {"step": [entry.get("step") for entry in entries]}
    for key in keys:
        curve[key] = [entry.get(key) for entry in entries]
    return curve


def _final_trainer_state(output_dir: Path, global_step: int) -> dict:
    checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    exact = output_dir / f"checkpoint-{global_step}" / "trainer_state.json"
    path = exact if exact.exists() else (checkpoints[-1] / "trainer_state.json" if checkpoints else None)
    if path is None or not path.exists():
        return {"log_history": [], "note": "no checkpoint saved: no trainer_state.json"}
    return json.loads(path.read_text())


def train_seed(seed: int, config: str, train_flags: list[str], output_dir: Path) -> tuple[list[str], dict]:
    """Run train_grpo.main for one seed; return its argv and the training side of the seed's result."""
    import train_grpo

    argv = [
        "--config", config, *train_flags, "--seed", str(seed), "--output_dir", str(output_dir),
        "--eval_scenarios", "0", "--report_to", "none",
    ]  # fmt: skip
    parsed = train_grpo.parse_args(argv)
    script_args, training_args, _ = parsed
    # Save at the last step (unless told otherwise): its trainer_state.json holds the whole reward curve.
    if not any(flag.split("=")[0] == "--save_steps" for flag in train_flags):
        argv += ["--save_steps", str(training_args.max_steps)]
    started = time.perf_counter()
    with trl_profiling_totals() as profiled:
        summary = train_grpo.main(argv)
    train_s = time.perf_counter() - started
    grpo_s = float(summary["train_runtime_s"] or 0.0)
    warm = {}
    marker = output_dir / "warm-start" / "warm_start.json"
    if script_args.sft_steps > 0 and marker.exists():
        warm = json.loads(marker.read_text())
    state = _final_trainer_state(output_dir, summary["global_step"])
    warm_s = float(warm.get("wall_s") or 0.0)
    return argv, {
        "global_step": summary["global_step"],
        "warm_start": warm or None,
        "reward_curve": reward_curve(state.get("log_history", [])),
        "profiled_s": dict(profiled),
        "wall_s": {
            "warm_start": warm_s,
            "grpo": grpo_s,
            **split_grpo_time(grpo_s, profiled),
            "setup": train_s - grpo_s - warm_s,  # model building and loading, dataset, final save
        },
    }


def start_model_path(output_dir: Path, script_args, model_args) -> str:
    """The model GRPO started from: the trained adapter's base, else the warm start or the base model."""
    adapter = output_dir / "adapter_config.json"
    if adapter.exists():
        return json.loads(adapter.read_text())["base_model_name_or_path"]
    if script_args.sft_steps > 0:
        return str(output_dir / "warm-start")
    return model_args.model_name_or_path


# --- the benchmark ------------------------------------------------------------------------------------


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "bitsandbytes", "accelerate", "datasets", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _git() -> dict:
    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def _cpu() -> dict:
    import torch

    from benchmarks.machine import cpu_model

    return {"model": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}


def _aggregate(evaluations: list[dict], description: str) -> dict:
    """Means over seeds and scenarios of each metric, plus each seed's held-out summary."""
    table = {
        key: float(np.mean([evaluation["per_scenario"][name] for evaluation in evaluations]))
        for name, (key, _, _) in METRICS.items()
    }
    return {
        "policy": description,
        **table,
        "per_seed": [evaluation["summary"] for evaluation in evaluations],
        "samples": evaluations[0]["samples"],
    }


def _earlier_warm_start(model_args) -> dict:
    """The ``warm_start.json`` of a model directory that an earlier run's SFT warm start wrote, or {}."""
    marker = Path(model_args.model_name_or_path or "") / "warm_start.json"
    return json.loads(marker.read_text()) if marker.is_file() else {}


def _start_description(script_args, model_args) -> str:
    base = " (NF4 base)" if model_args.load_in_4bit else ""
    if script_args.sft_steps > 0:
        return f"{script_args.sft_steps}-step SFT warm start on {script_args.sft_target} plans{base}"
    earlier = _earlier_warm_start(model_args)
    if earlier:
        return (
            f"an earlier {earlier.get('steps')}-step SFT warm start on {earlier.get('target')} plans "
            f"({model_args.model_name_or_path}){base}"
        )
    return f"base model, zero-shot{base}"


def run(args: argparse.Namespace, train_flags: list[str], command: list[str]) -> dict:
    """Train and evaluate every seed; return the benchmark's result (see the module docstring)."""
    import train_grpo

    started = time.perf_counter()
    git = _git()  # the code that runs, before anything else can commit
    work_dir = Path(args.work_dir or f"runs/learning/{Path(args.config).stem}")
    parsed0 = train_grpo.parse_args(["--config", args.config, *train_flags, "--report_to", "none"])
    script_args, training_args, model_args = parsed0
    settings = eval_settings(args, script_args, training_args)
    rows = eval_rows(settings)
    scenario_fingerprint = today_scenario_fingerprint(settings, rows)
    baselines, baseline_percents = baseline_summaries(rows)  # no model: cheap, once
    fair_start = not (script_args.sft_steps > 0 and script_args.sft_target == "optimal")
    fair_start = fair_start and _earlier_warm_start(model_args).get("target") != "optimal"
    if not fair_start:
        print(
            "learning benchmark: the start imitates the exact optimum (sft_target optimal); this run makes "
            "no claim about what RL learned (use --sft_target even_split, random, random_split or "
            "random_feasible)",
            file=sys.stderr,
        )
    fingerprint = {"config": args.config, "train_flags": train_flags, "settings": settings}
    start_cache: dict[str, dict] = {}  # a start shared by seeds (no warm start) is evaluated once
    seeds = []
    for seed in args.seeds:
        output_dir = work_dir / f"seed-{seed}"
        saved = output_dir / SEED_RESULT
        earlier = json.loads(saved.read_text()) if args.reuse and saved.exists() else {}
        if earlier.get("fingerprint") == fingerprint:
            if earlier.get("scenario_fingerprint") == scenario_fingerprint:
                print(f"learning benchmark: reusing seed {seed} from {saved}", file=sys.stderr)
                seeds.append(earlier)
                start_cache.setdefault(os.path.realpath(earlier["start_model"]), earlier["start"])
                continue
            print(
                f"learning benchmark: seed {seed}: not reusing {saved}: it was evaluated on held-out "
                f"scenarios with scenario fingerprint {earlier.get('scenario_fingerprint')}, today's is "
                f"{scenario_fingerprint} (prompts, optima or rewards changed); training it afresh",
                file=sys.stderr,
            )
        shutil.rmtree(output_dir, ignore_errors=True)
        print(f"learning benchmark: seed {seed}: training in {output_dir}", file=sys.stderr, flush=True)
        argv, trained = train_seed(seed, args.config, train_flags, output_dir)
        parsed = train_grpo.parse_args(argv)
        start_path = start_model_path(output_dir, parsed[0], parsed[2])
        adapter = str(output_dir) if (output_dir / "adapter_config.json").exists() else None
        print(f"learning benchmark: seed {seed}: evaluating {start_path} and the result", file=sys.stderr)
        key = os.path.realpath(start_path)
        shared = key in start_cache
        if not shared:
            start_cache[key] = evaluate(start_path, None, settings, parsed)
        after = evaluate(start_path if adapter else str(output_dir), adapter, settings, parsed)
        result = {
            "seed": seed,
            "fingerprint": fingerprint,
            "scenario_fingerprint": scenario_fingerprint,
            "train_argv": argv,
            "start_model": start_path,
            "start_evaluated_for_an_earlier_seed": shared,
            **trained,
            "start": start_cache[key],
            "after": after,
        }
        result["wall_s"] |= {
            "eval_start": 0.0 if shared else start_cache[key]["wall_s"],
            "eval_after": after["wall_s"],
        }
        result["memory_gb_after_seed"] = _memory_gb()  # one process trains every seed: watch it grow
        saved.write_text(json.dumps(result, indent=1))
        seeds.append(result)

    starts = [seed["start"] for seed in seeds]
    afters = [seed["after"] for seed in seeds]
    paired = {
        name: paired_difference(
            np.array([evaluation["per_scenario"][name] for evaluation in starts]),
            np.array([evaluation["per_scenario"][name] for evaluation in afters]),
            resamples=args.bootstrap_resamples,
        )
        for name in METRICS
    }
    wall_keys = (
        "warm_start",
        "grpo",
        "generation",
        "reward",
        "backward",
        "setup",
        "eval_start",
        "eval_after",
    )
    wall = {key: _sum_or_none([seed["wall_s"].get(key) for seed in seeds]) for key in wall_keys}
    steps = [seed["global_step"] for seed in seeds]
    return {
        "benchmark": "learning",
        "config": args.config,
        "train_flags": train_flags,
        "seeds": [seed["seed"] for seed in seeds],
        "eval_scenarios": args.eval_scenarios,
        "eval": settings | {"split": "eval", "decoding": "greedy"},
        "scenario_fingerprint": scenario_fingerprint,
        "grpo_steps": steps[0] if len(set(steps)) == 1 else steps,
        "fair_start": fair_start,
        "start": _aggregate(starts, _start_description(script_args, model_args)),
        "after": _aggregate(afters, f"the start + {_plural(steps[0], 'GRPO step')} (LoRA)"),
        "baselines": baselines,
        "delta_percent_points": paired["percent_of_optimum"]["mean"],
        "delta_ci95": paired["percent_of_optimum"]["ci95"],
        "delta_per_seed": paired["percent_of_optimum"]["per_seed"],
        "paired": paired,
        "bootstrap": {
            "resamples": args.bootstrap_resamples,
            "rng": f"numpy.random.default_rng({BOOTSTRAP_SEED})",
            "unit": "scenario; each scenario's after - start difference averaged over seeds",
            "interval": "percentile, 2.5 and 97.5",
        },
        "reward_curve": {str(seed["seed"]): seed["reward_curve"] for seed in seeds},
        "per_scenario": {
            "task": [row["task"] for row in rows],
            "generator_seed": [row["seed"] for row in rows],
            "start_percent_of_optimum": [e["per_scenario"]["percent_of_optimum"] for e in starts],
            "after_percent_of_optimum": [e["per_scenario"]["percent_of_optimum"] for e in afters],
            "baseline_percent_of_optimum": baseline_percents,
        },
        "warm_start": [seed["warm_start"] for seed in seeds],
        "memory_gb_after_seed": [seed.get("memory_gb_after_seed") for seed in seeds],
        "wall_s": {"total": time.perf_counter() - started, **wall, "per_seed": [s["wall_s"] for s in seeds]},
        "command": shlex.join(command),
        "cpu": _cpu(),
        "versions": _versions(),
        "git": git,
    }


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _memory_gb() -> dict[str, float]:
    """This process's resident memory now and at its peak so far (Linux), in GB."""
    import resource

    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        now = pages * os.sysconf("SC_PAGE_SIZE") / 1e9
    except (OSError, ValueError, IndexError):
        now = float("nan")
    return {"rss_now": now, "rss_peak": peak_kb * 1024 / 1e9}


def _sum_or_none(values: list) -> float | None:
    return None if any(value is None for value in values) else float(sum(values))


# --- the README table ---------------------------------------------------------------------------------


def _signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def _first_last(values: list, window: int = 10) -> tuple[float, float] | None:
    """Mean of the first and of the last ``window`` values (fewer, so they never overlap, on short curves)."""
    values = [value for value in values if value is not None]
    if not values:
        return None
    window = max(1, min(window, len(values) // 2))
    return float(np.mean(values[:window])), float(np.mean(values[-window:]))


SEED_WALL_PARTS = ("setup", "warm_start", "grpo", "eval_start", "eval_after")  # one seed's run, end to end


def _seeds_total(wall: dict) -> str:
    """The seeds' wall time summed from their own records: ``wall["total"]`` is this invocation's, which
    leaves out seeds kept from an earlier run with ``--reuse``."""
    per_seed = wall.get("per_seed") or []
    if not per_seed:
        return "n/a" if wall.get("total") is None else f"{wall['total']:.0f} s"
    return f"{sum(seed.get(part) or 0.0 for seed in per_seed for part in SEED_WALL_PARTS):.0f} s"


def _per_seed_and_tier(result: dict) -> str:
    """One line: each seed's start → after mean % of optimum on each task tier (from ``per_scenario``)."""
    table = result["per_scenario"]
    tasks = np.array(table["task"])
    starts, afters = table["start_percent_of_optimum"], table["after_percent_of_optimum"]
    parts = []
    for k, seed in enumerate(result["seeds"]):
        start = np.array(starts[min(k, len(starts) - 1)])  # one start for every seed when none is trained
        after = np.array(afters[k])
        tiers = ", ".join(
            f"{task} {start[tasks == task].mean():.1f} → {after[tasks == task].mean():.1f}"
            for task in result["eval"]["eval_tasks"]
        )
        parts.append(f"seed {seed}: {tiers}")
    return "Mean % of optimum, start → after, by seed and tier: " + "; ".join(parts) + "."


def _baselines_by_tier(result: dict) -> str:
    """One line: each baseline's mean % of optimum on each task tier (from its summary's ``per_task``)."""
    parts = []
    for name, summary in result["baselines"].items():
        tiers = ", ".join(
            f"{task} {summary['per_task'][task]['mean_percent_of_optimum']:.1f}"
            for task in result["eval"]["eval_tasks"]
            if task in summary.get("per_task", {})
        )
        parts.append(f"{name}: {tiers}")
    return "Baselines on the same scenarios (no model), mean % of optimum by tier: " + "; ".join(parts) + "."


def render(result: dict) -> str:
    """The README's markdown table (and the lines under it) from a benchmark result."""
    seeds = result["seeds"]
    header = "| policy | " + " | ".join(label for _, label, _ in METRICS.values()) + " |"
    lines = [header, "|---" * (len(METRICS) + 1) + "|"]
    for side in ("start", "after"):
        cells = [f"{result[side][key]:.{digits}f}" for key, _, digits in METRICS.values()]
        lines.append(f"| {side}: {result[side]['policy']} | " + " | ".join(cells) + " |")
    cells = []
    for name, (_, _, digits) in METRICS.items():
        paired = result["paired"][name]
        low, high = paired["ci95"]
        cells.append(f"{_signed(paired['mean'], digits)} [{_signed(low, digits)}, {_signed(high, digits)}]")
    lines.append("| **after − start** [95 % CI] | " + " | ".join(cells) + " |")
    for name, summary in result.get("baselines", {}).items():  # results before issue #27 have none
        cells = [f"{summary[key]:.{digits}f}" for key, _, digits in METRICS.values()]
        lines.append(f"| baseline: {name} | " + " | ".join(cells) + " |")
    per_seed = ", ".join(
        f"seed {seed} {_signed(delta, 1)}"
        for seed, delta in zip(seeds, result["delta_per_seed"], strict=True)
    )
    lines += [
        "",
        f"{result['eval_scenarios']} held-out scenarios ({', '.join(result['eval']['eval_tasks'])}), "
        f"greedy, × {_plural(len(seeds), 'training seed')}; the interval resamples scenarios "
        f"({result['bootstrap']['resamples']:,} bootstrap resamples). "
        f"After − start in % of optimum per seed: {per_seed}.",
        _per_seed_and_tier(result),
    ]
    if result.get("baselines"):
        lines.append(_baselines_by_tier(result))
    curves = [_first_last(curve.get("reward", [])) for curve in result["reward_curve"].values()]
    if all(curves):
        lines.append(
            "Training reward, mean of the first → last (up to) 10 logged steps: "
            + ", ".join(f"seed {seed} {a:.3f} → {b:.3f}" for seed, (a, b) in zip(seeds, curves, strict=True))
            + "."
        )
    wall = result["wall_s"]

    def seconds(key: str) -> str:
        if wall.get(key) is None:
            return "n/a"
        return f"{wall[key]:.1f} s" if wall[key] < 10 else f"{wall[key]:.0f} s"

    lines.append(
        f"Wall time, all seeds: warm start {seconds('warm_start')}, GRPO {seconds('grpo')} (generation "
        f"{seconds('generation')}, reward {seconds('reward')}, "
        f"forward/backward/optimizer {seconds('backward')}), "
        f"evaluation {_seconds_sum(wall, 'eval_start', 'eval_after')}, total {_seeds_total(wall)}; "
        f"{result['cpu']['model']}, {result['cpu']['cores']} cores."
    )
    if not result["fair_start"]:
        lines.append(
            "**Not a learning claim:** the start imitated the exact optimum (`sft_target: optimal`), so what "
            "GRPO adds cannot be told from what the warm start copied."
        )
    if result.get("scenario_fingerprint"):
        lines.append(
            f"Scenario fingerprint `{result['scenario_fingerprint']}` (`--fingerprint` prints today's)."
        )
    lines.append(f"Command: `{result['command']}`")
    return "\n".join(lines)


def _seconds_sum(wall: dict, *keys: str) -> str:
    values = [wall.get(key) for key in keys]
    return "n/a" if any(value is None for value in values) else f"{sum(values):.0f} s"


# --- command line -------------------------------------------------------------------------------------


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        allow_abbrev=False,  # --seed (a train_grpo flag, refused) must not pass for --seeds
        epilog="Any other flag goes to train_grpo.py (e.g. --max_steps 60 --sft_target even_split).",
    )
    parser.add_argument("--config", help="train_grpo.py preset, e.g. configs/tiny_cpu.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="training seeds (default 0 1)")
    parser.add_argument("--eval_scenarios", type=int, default=96, help="held-out scenarios (default 96)")
    parser.add_argument("--eval_tasks", nargs="+", help="held-out task tiers (default: the preset's tasks)")
    parser.add_argument("--eval_batch_size", type=int, default=8, help="prompts generated at once")
    parser.add_argument("--eval_dataset_seed", type=int, default=None, help="which held-out scenarios")
    parser.add_argument("--max_new_tokens", type=int, help="default: the preset's max_completion_length")
    parser.add_argument("--bootstrap_resamples", type=int, default=BOOTSTRAP_RESAMPLES)
    parser.add_argument("--output", help="the JSON result, e.g. benchmarks/results/learning_<preset>.json")
    parser.add_argument("--work_dir", help="training runs, one per seed (default runs/learning/<preset>)")
    parser.add_argument("--reuse", action="store_true", help="keep finished seeds of the same command")
    parser.add_argument("--render", metavar="RESULT_JSON", help="print the README table of a result; no run")
    parser.add_argument(
        "--fingerprint",
        action="store_true",
        help="print today's scenario_fingerprint of the held-out set (last line) and exit; no training",
    )
    args, train_flags = parser.parse_known_args(argv)
    if args.render:
        return args, train_flags
    if not args.config or not (args.output or args.fingerprint):
        parser.error("--config and --output are required (or --render RESULT_JSON, or --fingerprint)")
    clashing = [flag for flag in train_flags if flag.split("=")[0] in OWN_TRAIN_FLAGS]
    if clashing:
        parser.error(f"{', '.join(clashing)}: set by the benchmark (use --seeds and --work_dir)")
    if args.eval_scenarios < 1 or not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error("--eval_scenarios must be positive and --seeds distinct")
    if args.eval_dataset_seed is None:
        from fleet_rl.training.heldout import EVAL_DATASET_SEED

        args.eval_dataset_seed = EVAL_DATASET_SEED
    return args, train_flags


def print_fingerprint(args: argparse.Namespace, train_flags: list[str]) -> str:
    """Print what the scenario fingerprint covers, then today's fingerprint alone on the last line."""
    import train_grpo
    from benchmarks.scenario_fingerprint import PANEL

    with contextlib.redirect_stdout(sys.stderr):  # whatever the imports print
        script_args, training_args, _ = train_grpo.parse_args(
            ["--config", args.config, *train_flags, "--report_to", "none"]
        )
        settings = eval_settings(args, script_args, training_args)
        fingerprint = today_scenario_fingerprint(settings)
    print(
        f"scenario fingerprint of {settings['eval_scenarios']} held-out scenarios "
        f"({', '.join(settings['eval_tasks'])}; dataset seed {settings['eval_dataset_seed']}, prompt style "
        f"{settings['prompt_style']}): prompts, optima and the fleet_reward of {', '.join(PANEL)}"
    )
    print(fingerprint)
    return fingerprint


def main(argv: list[str] | None = None) -> dict | None:
    argv = sys.argv[1:] if argv is None else argv
    args, train_flags = parse(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return None
    if args.fingerprint:
        print_fingerprint(args, train_flags)
        return None
    with contextlib.redirect_stdout(
        sys.stderr
    ):  # stdout carries only the table; progress and logs go to stderr
        result = run(args, train_flags, ["python", "benchmarks/learning.py", *argv])
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return result


if __name__ == "__main__":
    main()
