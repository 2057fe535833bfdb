"""The shared prompt: running a group's prompt once gives TRL's log-probs, loss and gradients, and TRL's
greedy answers, on a real GRPOTrainer with the tiny Llama (full fine-tuning and LoRA)."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
from trl import GRPOConfig, GRPOTrainer
from trl.extras.profiling import ProfilingContext

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.shared_prompt import rows_share_prefix, tokens_until_eos
from fleet_rl.training.trainer import FleetGRPOTrainer

GROUP = 4


def test_rows_share_a_prefix_only_when_tokens_and_mask_agree():
    ids = torch.tensor([[5, 6, 7, 1], [5, 6, 7, 2], [5, 6, 7, 3]])
    ones = torch.ones_like(ids)
    assert rows_share_prefix(ids, ones, 3)
    assert not rows_share_prefix(ids, ones, 4)  # the answers differ
    left_padded = ones.clone()
    left_padded[0, 0] = 0
    assert not rows_share_prefix(ids, left_padded, 3)  # same tokens, one row padded
    assert not rows_share_prefix(ids[:1], ones[:1], 3)  # one row: nothing to share
    assert not rows_share_prefix(ids, ones, 1)  # nothing left to cache


def test_tokens_until_eos_keep_the_first_eos_and_whole_rows_without_one():
    rows = torch.tensor([[4, 9, 2, 9], [4, 4, 4, 4], [9, 1, 1, 1]])
    assert tokens_until_eos(rows, [9]) == [[4, 9], [4, 4, 4, 4], [9]]
    assert tokens_until_eos(rows, [2, 9]) == [[4, 9], [4, 4, 4, 4], [9]]


def answer_length(prompts, completions, completion_ids, **kwargs) -> list[float]:
    """Different rewards within a group, so the advantages (and the gradients) are not zero."""
    return [float(sum(ids) % 7) / 10 for ids in completion_ids]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer_on(tiny_dir, tmp_path, lora: bool, nf4: bool = False, **config) -> FleetGRPOTrainer:
    settings = {
        "output_dir": str(tmp_path),
        "use_cpu": True,
        "per_device_train_batch_size": GROUP,
        "num_generations": GROUP,
        "max_completion_length": 8,
        "max_steps": 1,
        "report_to": [],
        "save_strategy": "no",
        "seed": 0,
        "disable_tqdm": True,
        "beta": 0.0,
        "bf16": False,  # fp32 throughout (the CPU presets): the two paths agree to float rounding
        "gradient_checkpointing": False,  # it drops the cache in training: TRL's path
    } | config
    model = str(tiny_dir)
    if nf4:  # QLoRA as the tiny preset loads it: an NF4 base through bitsandbytes (it runs on CPU)
        quantization = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        )
        model = AutoModelForCausalLM.from_pretrained(tiny_dir, quantization_config=quantization)
    return FleetGRPOTrainer(
        model=model,
        reward_funcs=answer_length,
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_list([{"prompt": f"plan the cluster number {i}"} for i in range(8)]),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None,
    )


def loss_and_gradients(trainer, inputs, share: bool) -> tuple[float, torch.Tensor, dict[str, torch.Tensor]]:
    trainer.share_prompt = share
    trainer.model.zero_grad()
    prompt_completion = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, prompt_completion, mask, inputs["completion_ids"].size(1), compute_entropy=True
    )
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    trained = [(name, p) for name, p in trainer.model.named_parameters() if p.requires_grad]
    gradients = {name: parameter.grad.clone() for name, parameter in trained}
    return float(loss), logps.detach() * inputs["completion_mask"], gradients


@pytest.mark.parametrize(
    ("lora", "nf4"), [(False, False), (True, False), (True, True)], ids=["full", "lora", "qlora"]
)
def test_the_shared_prompt_gives_trls_logps_loss_and_gradients(tiny_dir, tmp_path, lora, nf4):
    trainer = trainer_on(tiny_dir, tmp_path, lora, nf4)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    inputs = trainer._generate_and_score_completions([{"prompt": "plan the cluster number 0"}] * GROUP)
    assert inputs["advantages"].abs().sum() > 0, "a flat group: the gradients would all be zero"
    trl_loss, trl_logps, trl_grads = loss_and_gradients(trainer, inputs, share=False)
    loss, logps, grads = loss_and_gradients(trainer, inputs, share=True)
    assert torch.allclose(logps, trl_logps, atol=1e-5)
    assert loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-7)
    assert grads.keys() == trl_grads.keys()
    assert any(float(g.abs().max()) > 0 for g in trl_grads.values())
    for name, gradient in grads.items():
        if gradient.dtype == torch.float32:
            assert torch.allclose(gradient, trl_grads[name], rtol=1e-4, atol=1e-6), name
        else:  # peft keeps a k-bit model's adapters in bf16: they agree to bf16's rounding (2**-8), summed
            difference = (gradient.float() - trl_grads[name].float()).norm()
            assert difference <= 0.02 * trl_grads[name].float().norm(), name  # lora_A's are 0: equal


def test_the_shared_prompt_answers_greedily_as_trl_does(tiny_dir, tmp_path, monkeypatch):
    trainer = trainer_on(tiny_dir, tmp_path, lora=False, generation_kwargs={"do_sample": False})
    profiled = []  # TRL's profiling names, which the learning benchmark splits its wall time by
    monkeypatch.setattr(ProfilingContext, "_log_metrics", lambda self, duration: profiled.append(self.name))
    prompt_ids = [AutoTokenizer.from_pretrained(tiny_dir)("plan the cluster number 3")["input_ids"]] * GROUP
    answers = {}
    for share in (False, True):
        trainer.share_prompt = share
        answers[share], _ = trainer._generate_single_turn(prompt_ids, None, {}, GROUP)
    assert answers[True] == answers[False]
    assert profiled == ["FleetGRPOTrainer.transformers.generate"] * 2
    assert all(len(ids) >= 1 for ids in answers[True])


def test_different_prompts_take_trls_path(tiny_dir, tmp_path, monkeypatch):
    trainer = trainer_on(tiny_dir, tmp_path, lora=False)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompt_ids = [tokenizer(f"plan the cluster number {i}")["input_ids"] for i in range(GROUP)]
    calls = []
    trls = GRPOTrainer._generate_single_turn

    def counted(self, *args, **kwargs):
        calls.append(1)
        return trls(self, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", counted)
    completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, GROUP)
    assert calls == [1] and len(completions) == GROUP
