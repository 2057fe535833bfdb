"""The shipped configs parse, command-line flags override them, and bad options stop before any model loads.

Training configs (``configs/*.yaml``) go through ``train_grpo.parse_args`` exactly as a user's command line
does. The 8B recipes set ``bf16: true``, which transformers refuses on a machine without a bf16-capable GPU,
so they are parsed here "as on a GPU box" by reporting bf16 support to transformers (``bf16_gpu``); CUDA
itself stays invisible, so ``check_options`` still sees a CPU machine and rejects ``backend: unsloth``.
Accelerate configs (``configs/accelerate/*.yaml``) are loaded with accelerate's own ``ClusterConfig``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch
import yaml
from accelerate.commands.config.config_args import ClusterConfig
from accelerate.utils import DistributedType
from trl import GRPOConfig, ModelConfig, get_peft_config, get_quantization_config

import train_grpo
from fleet_rl.scenario_generator import TASKS
from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.checks import check_options
from rewards import REWARD_FUNCS

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "configs"
TRAINING_CONFIGS = sorted(CONFIGS.glob("*.yaml"))
ACCELERATE_CONFIGS = sorted((CONFIGS / "accelerate").glob("*.yaml"))
TINY = str(CONFIGS / "tiny_cpu.yaml")
QLORA = str(CONFIGS / "llama31_8b_qlora.yaml")
SMOLLM2 = str(CONFIGS / "smollm2_cpu.yaml")
UNSLOTH = str(CONFIGS / "llama31_8b_unsloth.yaml")
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a CUDA GPU")


@pytest.fixture
def bf16_gpu(monkeypatch):
    """transformers sees a bf16-capable GPU (the 8B recipes' ``bf16: true`` validates); CUDA stays off."""
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda: True)


def parse_error(capsys, argv: list[str]) -> str:
    """Run ``parse_args``; assert a usage error (exit code 2) and return what it printed."""
    with pytest.raises(SystemExit) as excinfo:
        train_grpo.parse_args(argv)
    assert excinfo.value.code == 2
    return capsys.readouterr().err


def test_the_training_configs_are_the_expected_ones():
    assert {path.name for path in TRAINING_CONFIGS} >= {
        "tiny_cpu.yaml",
        "llama31_8b_qlora.yaml",
        "llama31_8b_unsloth.yaml",
    }


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda path: path.name)
def test_every_key_is_a_dataclass_field(path):
    classes = (FleetScriptArguments, GRPOConfig, ModelConfig)
    fields = {field.name for cls in classes for field in dataclasses.fields(cls)}
    keys = set(yaml.safe_load(path.read_text()))
    assert keys - fields == set()


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda path: path.name)
def test_every_training_config_parses(path, bf16_gpu, capsys):
    backend = yaml.safe_load(path.read_text()).get("backend", "transformers")
    if backend == "unsloth" and not torch.cuda.is_available():
        message = parse_error(capsys, ["--config", str(path)])
        assert "error: backend 'unsloth' needs a CUDA GPU and none is visible" in message
        assert "use --backend transformers" in message
        return
    script_args, training_args, model_args = train_grpo.parse_args(["--config", str(path)])
    assert training_args.generation_batch_size % training_args.num_generations == 0
    assert len(training_args.reward_weights) == len(script_args.reward_funcs)


def test_unsloth_recipe_carries_the_unsloth_options(bf16_gpu):
    script_args, training_args, model_args = train_grpo.parse_args(
        ["--config", UNSLOTH, "--backend", "transformers", "--fast_inference", "false"]
    )
    config = yaml.safe_load(Path(UNSLOTH).read_text())
    assert config["backend"] == "unsloth" and config["fast_inference"] is True
    assert config.get("use_vllm", False) is False  # Unsloth's fast inference already is vLLM
    assert config["sft_steps"] == 0
    assert model_args.load_in_4bit and model_args.lora_target_modules == ALL_LINEAR
    assert 0.0 < script_args.gpu_memory_utilization < 1.0
    # the context Unsloth loads the model for holds a full-style prompt (~1.3k tokens) and the completion
    assert script_args.max_seq_length >= 1300 + training_args.max_completion_length


def test_qlora_recipe_values(bf16_gpu):
    script_args, training_args, model_args = train_grpo.parse_args(["--config", QLORA])
    assert model_args.model_name_or_path == "meta-llama/Llama-3.1-8B-Instruct"
    assert model_args.dtype == "bfloat16"
    assert model_args.load_in_4bit and not model_args.load_in_8bit
    assert model_args.bnb_4bit_quant_type == "nf4" and model_args.use_bnb_nested_quant
    assert model_args.use_peft and model_args.lora_target_modules == ALL_LINEAR
    # what bitsandbytes and PEFT actually receive
    quantization = get_quantization_config(model_args)
    assert quantization.load_in_4bit and quantization.bnb_4bit_quant_type == "nf4"
    assert quantization.bnb_4bit_use_double_quant and quantization.bnb_4bit_compute_dtype == torch.bfloat16
    assert set(get_peft_config(model_args).target_modules) == set(ALL_LINEAR)
    assert script_args.backend == "transformers" and script_args.sft_steps == 0
    assert script_args.tasks == list(TASKS) and script_args.prompt_style == "full"
    assert len(script_args.task_weights) == len(script_args.tasks)
    assert script_args.reward_funcs[0] == "fleet_reward"
    assert training_args.reward_weights == [1.0] + [0.0] * (len(script_args.reward_funcs) - 1)
    assert [fn.__name__ for fn in script_args.resolved_reward_funcs] == script_args.reward_funcs
    # one optimizer step per GPU: 8 x 4 = 32 completions = 4 prompts x 8 generations
    assert training_args.num_generations == 8
    assert training_args.generation_batch_size == 32
    assert training_args.generation_batch_size % training_args.num_generations == 0
    assert 5e-6 <= training_args.learning_rate <= 1e-5
    assert training_args.beta == 0.0 and training_args.loss_type == "dapo"
    assert training_args.mask_truncated_completions and training_args.bf16
    assert training_args.gradient_checkpointing and not training_args.use_vllm
    assert training_args.log_completions and training_args.report_to == ["wandb"]
    assert training_args.output_dir == "outputs/llama31_8b_qlora"


@pytest.mark.skipif(
    torch.cuda.is_available() and torch.cuda.is_bf16_supported(), reason="needs a machine without bf16 GPU"
)
def test_gpu_recipe_on_a_cpu_machine_is_a_usage_error(capsys):
    message = parse_error(capsys, ["--config", QLORA])
    assert message.strip().splitlines() == [
        f"train_grpo.py: error: {QLORA} is a GPU recipe (bf16 on CUDA) and this machine has no CUDA GPU; "
        "on a CPU run configs/tiny_cpu.yaml or configs/smollm2_cpu.yaml, or add --use_cpu true --bf16 false"
    ]  # one line naming what to run instead, no usage dump


def test_command_line_overrides_the_yaml():
    config = yaml.safe_load(Path(TINY).read_text())
    assert config["max_steps"] != 3
    script_args, training_args, model_args = train_grpo.parse_args(
        ["--config", TINY, "--max_steps", "3", "--num_prompts", "16", "--lora_r", "8"]
    )
    assert training_args.max_steps == 3
    assert script_args.num_prompts == 16 and model_args.lora_r == 8
    assert training_args.learning_rate == config["learning_rate"]  # untouched keys keep the YAML value


# --- bad input: exit code 2 and what to change, before any model loads ---


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail the test if ``main`` gets as far as building, warm-starting or loading a model."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")

    for name in ("ensure_tiny_model", "warm_start", "load_policy", "FleetGRPOTrainer"):
        monkeypatch.setattr(train_grpo, name, forbidden)


def main_error(capsys, extra: list[str]) -> str:
    with pytest.raises(SystemExit) as excinfo:
        train_grpo.main(["--config", TINY, "--report_to", "none", *extra])
    assert excinfo.value.code == 2
    return capsys.readouterr().err


def test_unknown_reward_name_lists_the_valid_ones(no_model_loading, capsys):
    message = main_error(
        capsys, ["--reward_funcs", "fleet_reward", "fleet_rewrd", "--reward_weights", "1", "0"]
    )
    assert "unknown reward function 'fleet_rewrd'" in message
    for name in REWARD_FUNCS:
        assert name in message


def test_batch_not_divisible_by_num_generations(no_model_loading, capsys):
    message = main_error(capsys, ["--per_device_train_batch_size", "6", "--num_generations", "4"])
    assert "num_generations" in message
    assert "--per_device_train_batch_size" in message  # the knob to turn


@NO_CUDA
def test_unsloth_backend_without_gpu(no_model_loading, capsys):
    message = main_error(capsys, ["--backend", "unsloth", "--sft_steps", "0"])
    assert "backend 'unsloth' needs a CUDA GPU" in message and "--backend transformers" in message


@NO_CUDA
def test_vllm_without_gpu(no_model_loading, capsys):
    message = main_error(capsys, ["--use_vllm", "true"])
    assert "use_vllm needs a CUDA GPU" in message and "--use_vllm" in message


def test_an_option_error_is_one_line_without_the_usage_dump(no_model_loading, capsys):
    message = main_error(capsys, ["--sft_steps", "-1"])
    assert len(message.strip().splitlines()) == 1 and "usage:" not in message


@NO_CUDA
def test_unsloth_backend_without_the_package(no_model_loading, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "unsloth" else real(name, *a)
    )
    with pytest.raises(
        ValueError, match="backend 'unsloth' needs the unsloth package: pip install -c constraints/gpu"
    ):
        script_args, training_args, model_args = train_grpo.parse_args(["--config", TINY, "--sft_steps", "0"])
        script_args.backend = "unsloth"
        check_options(script_args, training_args, model_args, cuda_available=True)


def test_load_in_4bit_without_a_working_bitsandbytes_backend(no_model_loading, capsys, monkeypatch):
    """Simulated: bitsandbytes' NF4 kernels fail on this device. One line, before any model loads."""
    import fleet_rl.training.bitsandbytes_backend as backend

    monkeypatch.setattr(backend, "bitsandbytes_4bit_error", lambda device: f"no kernels on {device}")
    message = main_error(capsys, ["--load_in_4bit", "true"])
    assert message.strip().splitlines() == [
        "train_grpo.py: error: load_in_4bit needs bitsandbytes' 4-bit kernels and no kernels on cpu; "
        "reinstall the locked set (pip install -c constraints/cpu.txt -e .) or train without it "
        "(--load_in_4bit false)"
    ]


def test_bitsandbytes_4bit_round_trips_on_this_cpu():
    from fleet_rl.training.bitsandbytes_backend import bitsandbytes_4bit_error

    assert bitsandbytes_4bit_error("cpu") is None


def test_reward_weights_length_mismatch(no_model_loading, capsys):
    message = main_error(capsys, ["--reward_weights", "1", "0"])
    assert "reward_weights has 2 values for 5 reward_funcs" in message
    assert "one weight per function" in message


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--turn_credit", "true"], "turn_credit (per-turn credit in revision episodes) was retired"),
        (["--expert_iteration_every=5"], "expert_iteration_every (expert iteration) was retired"),
        (["--sample_every_job_share", "0.5"], "sample_every_job_share (every-job sampling) was retired"),
        (["--build_tiny_model", "true"], "build_tiny_model was replaced by local_model: tiny"),
        (["--episode_mode", "revise"], "episode_mode 'revise' (revision episodes) was retired in issue #69"),
    ],
)
def test_a_retired_option_names_what_replaced_it_or_the_commit_that_last_had_it(
    no_model_loading, capsys, flags, expected
):
    message = main_error(capsys, flags)
    assert expected in message and len(message.strip().splitlines()) == 1
    assert "2a054bb" in message or "replaced by" in message


def test_a_retired_option_in_a_config_file_exits_2_before_anything_loads(no_model_loading, tmp_path, capsys):
    config = tmp_path / "old.yaml"
    config.write_text(Path(SMOLLM2).read_text() + "\nresample_flat_groups: 2\n")
    with pytest.raises(SystemExit) as excinfo:
        train_grpo.main(["--config", str(config)])
    assert excinfo.value.code == 2
    message = capsys.readouterr().err
    assert message.strip() == (
        "train_grpo.py: error: resample_flat_groups (fresh prompts for flat steps (DAPO dynamic sampling)) "
        "was retired in issue #69; the last commit that had it is 2a054bb"
    )


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--self_imitation_coef", "-0.1"], "self_imitation_coef must be >= 0 (0: off), got -0.1"),
        (["--self_imitation_buffer_size", "0"], "self_imitation_buffer_size must be >= 1, got 0"),
        (["--self_imitation_batch_size", "0"], "self_imitation_batch_size must be >= 1, got 0"),
    ],
)
def test_self_imitation_options(no_model_loading, capsys, flags, expected):
    assert expected in main_error(capsys, flags)


def test_the_trainer_options_follow_the_script_options():
    from fleet_rl.training.arguments import FleetScriptArguments
    from train_grpo import trainer_options

    off = {
        "share_prompt": True,
        "explore_repair_rate": 0.0,
        "job_credit": 0.0,
        "omitted_job_credit": None,
        "self_imitation_coef": 0.0,
        "self_imitation_min_reward": 0.3,
        "self_imitation_buffer_size": 64,
        "self_imitation_batch_size": 2,
    }
    assert trainer_options(FleetScriptArguments()) == off
    assert trainer_options(FleetScriptArguments(share_prompt=False)) == off | {"share_prompt": False}
    assert trainer_options(FleetScriptArguments(backend="unsloth")) == off | {"share_prompt": False}
    preset = FleetScriptArguments(
        job_credit=1.0, omitted_job_credit=0.0, explore_repair_rate=0.5, self_imitation_coef=0.3
    )
    assert trainer_options(preset) == off | {
        "job_credit": 1.0,
        "omitted_job_credit": 0.0,
        "explore_repair_rate": 0.5,
        "self_imitation_coef": 0.3,
    }


def test_the_tiny_preset_runs_trls_code_paths_only():
    """Every hook of FleetGRPOTrainer off, the shared prompt included (its two prompts a step would
    otherwise be shared group by group): the CI's training runs TRL's own code."""
    script_args, training_args, _ = train_grpo.parse_args(["--config", TINY, "--report_to", "none"])
    options = train_grpo.trainer_options(script_args)
    assert options["explore_repair_rate"] == options["job_credit"] == options["self_imitation_coef"] == 0
    assert options["share_prompt"] is False
    prompts_per_step = training_args.per_device_train_batch_size // training_args.num_generations
    assert prompts_per_step >= 2


def test_unknown_task(no_model_loading, capsys):
    message = main_error(capsys, ["--tasks", "easy", "impossible"])
    assert "'impossible'" in message
    assert f"valid tasks: {', '.join(TASKS)}" in message


def test_unknown_config_key_is_rejected(tmp_path, capsys):
    config = tmp_path / "typo.yaml"
    config.write_text(Path(TINY).read_text() + "\nlearnig_rate: 0.1\n")
    message = parse_error(capsys, ["--config", str(config)])
    assert "learnig_rate" in message


# --- accelerate configs ---


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda path: path.name)
def test_accelerate_config_loads(path):
    raw = yaml.safe_load(path.read_text())
    for key in ("compute_environment", "distributed_type", "num_processes", "mixed_precision", "use_cpu"):
        assert key in raw
    config = ClusterConfig.from_yaml_file(str(path))  # accelerate's own loader: rejects unknown keys
    assert config.num_processes >= 2 and config.num_machines == 1


def test_the_accelerate_configs_are_the_expected_ones():
    configs = {path.stem: ClusterConfig.from_yaml_file(str(path)) for path in ACCELERATE_CONFIGS}
    assert set(configs) >= {"ddp", "deepspeed_zero2", "deepspeed_zero3", "cpu_2proc"}
    ddp = configs["ddp"]
    assert ddp.distributed_type == DistributedType.MULTI_GPU and ddp.mixed_precision == "bf16"
    assert not ddp.use_cpu
    for stage in (2, 3):
        deepspeed = configs[f"deepspeed_zero{stage}"]
        assert deepspeed.distributed_type == DistributedType.DEEPSPEED
        assert deepspeed.deepspeed_config["zero_stage"] == stage
    assert configs["deepspeed_zero3"].deepspeed_config["zero3_init_flag"] is True  # needed for QLoRA + ZeRO-3
    cpu = configs["cpu_2proc"]
    # torchrun launcher (accelerate starts MULTI_CPU only through mpirun), CPU workers, fp32
    assert cpu.distributed_type == DistributedType.MULTI_GPU and cpu.use_cpu
    assert cpu.num_processes == 2 and cpu.mixed_precision == "no"
