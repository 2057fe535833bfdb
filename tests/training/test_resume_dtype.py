"""A resumed QLoRA run trains bf16 adapters, as the fresh run did (PEFT's load_adapter upcasts them to
fp32); a full-precision run is left as it is. Real GRPOTrainer, the tiny Llama on an NF4 base (bitsandbytes
on CPU)."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, TrainerCallback
from trl import GRPOConfig

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.trainer import FleetGRPOTrainer, is_quantized, trainable_to_bf16

GROUP = 4


def by_length(completion_ids, **kwargs) -> list[float]:
    return [float(sum(ids) % 7) / 10 for ids in completion_ids]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


class TrainableDtypes(TrainerCallback):
    """The dtypes of the trainable weights at each step's end."""

    def __init__(self) -> None:
        self.seen: dict[int, set[torch.dtype]] = {}

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.seen[state.global_step] = {p.dtype for p in model.parameters() if p.requires_grad}


def trainer_on(tiny_dir, output_dir, nf4: bool, max_steps: int) -> tuple[FleetGRPOTrainer, TrainableDtypes]:
    model = str(tiny_dir)
    if nf4:
        quantization = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        )
        model = AutoModelForCausalLM.from_pretrained(tiny_dir, quantization_config=quantization)
    dtypes = TrainableDtypes()
    trainer = FleetGRPOTrainer(
        model=model,
        reward_funcs=by_length,
        args=GRPOConfig(
            output_dir=str(output_dir),
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=GROUP,
            num_generations=GROUP,
            max_completion_length=6,
            max_steps=max_steps,
            save_steps=1,
            report_to=[],
            seed=0,
            disable_tqdm=True,
            gradient_checkpointing=False,
        ),  # fmt: skip
        train_dataset=Dataset.from_list([{"prompt": f"plan cluster {i}"} for i in range(8)]),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        callbacks=[dtypes],
    )
    return trainer, dtypes


@pytest.mark.parametrize(
    ("nf4", "dtype"), [(True, torch.bfloat16), (False, torch.float32)], ids=["qlora", "lora"]
)
def test_a_resumed_run_trains_adapters_in_the_fresh_runs_dtype(tiny_dir, tmp_path, nf4, dtype):
    fresh, fresh_dtypes = trainer_on(tiny_dir, tmp_path, nf4, max_steps=1)
    fresh.train()
    assert fresh_dtypes.seen == {1: {dtype}}
    resumed, resumed_dtypes = trainer_on(tiny_dir, tmp_path, nf4, max_steps=2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    assert resumed_dtypes.seen == {2: {dtype}}  # PEFT's load_adapter alone leaves qlora's in fp32


def test_only_trainable_weights_are_cast_and_a_full_precision_model_is_not_quantized(tiny_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert not is_quantized(model)
    for name, parameter in model.named_parameters():
        parameter.requires_grad = name.endswith("lm_head.weight")
    assert trainable_to_bf16(model) == ["lm_head.weight"]
    assert {p.dtype for n, p in model.named_parameters() if n != "lm_head.weight"} == {torch.float32}
    assert model.lm_head.weight.dtype == torch.bfloat16
    assert trainable_to_bf16(model) == []  # already bf16
