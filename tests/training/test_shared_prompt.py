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
from fleet_rl.training.shared_prompt import generation_runs, prompt_runs, rows_share_prefix, tokens_until_eos
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


def test_prompt_runs_are_the_groups_of_adjacent_rows_that_share_a_prompt():
    ids = torch.tensor([[5, 6, 7, 1], [5, 6, 7, 2], [0, 8, 9, 3], [0, 8, 9, 4], [0, 8, 9, 5]])
    mask = torch.ones_like(ids)
    mask[2:, 0] = 0  # the second prompt is left-padded, as TRL pads a shorter prompt
    assert prompt_runs(ids, mask, 3) == [slice(0, 2), slice(2, 5)]
    assert prompt_runs(ids[:3], mask[:3], 3) is None  # a lone row gains nothing: TRL's path
    assert prompt_runs(ids, mask, 4) is None  # the answers differ
    unpadded = torch.ones_like(ids)
    assert prompt_runs(ids, unpadded, 3) == [slice(0, 2), slice(2, 5)]
    mixed = mask.clone()
    mixed[3, 0] = 1  # same tokens, one row not padded: a run of its own
    assert prompt_runs(ids, mixed, 3) is None
    assert generation_runs([[1, 2], [1, 2], [3, 4, 5], [3, 4, 5]]) == [slice(0, 2), slice(2, 4)]
    assert generation_runs([[1, 2], [1, 2], [3, 4, 5]]) is None
    assert generation_runs([[1], [1]]) is None  # nothing left to cache
    assert generation_runs([]) is None


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


def test_two_prompts_a_step_are_shared_group_by_group_with_trls_numbers(tiny_dir, tmp_path):
    """Two prompts of different lengths (TRL left-pads the shorter) in one batch, each with its group."""
    trainer = trainer_on(tiny_dir, tmp_path, lora=True, num_generations=GROUP // 2)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    prompts = ["plan the cluster number 0", "plan every cluster of the fleet, number 11"]
    rows = [{"prompt": prompt} for prompt in prompts for _ in range(GROUP // 2)]
    inputs = trainer._generate_and_score_completions(rows)
    assert (inputs["prompt_mask"] == 0).any(), "equal lengths: the padded case is not tested"
    prompt_completion = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    assert len(prompt_runs(prompt_completion, mask, inputs["prompt_ids"].size(1))) == 2
    assert inputs["advantages"].abs().sum() > 0, "flat groups: the gradients would all be zero"
    trl_loss, trl_logps, trl_grads = loss_and_gradients(trainer, inputs, share=False)
    loss, logps, grads = loss_and_gradients(trainer, inputs, share=True)
    assert torch.allclose(logps, trl_logps, atol=1e-5)
    assert loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-7)
    assert any(float(g.abs().max()) > 0 for g in trl_grads.values())
    for name, gradient in grads.items():
        assert torch.allclose(gradient, trl_grads[name], rtol=1e-4, atol=1e-6), name


def test_two_prompts_are_answered_greedily_as_trl_does(tiny_dir, tmp_path, monkeypatch):
    trainer = trainer_on(tiny_dir, tmp_path, lora=False, generation_kwargs={"do_sample": False})
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompt_ids = [tokenizer(f"plan the cluster number {i}")["input_ids"] for i in (3, 7) for _ in range(2)]
    assert prompt_ids[0] != prompt_ids[2] and len(generation_runs(prompt_ids)) == 2
    answers = {}
    for share in (False, True):
        trainer.share_prompt = share
        answers[share], _ = trainer._generate_single_turn(prompt_ids, None, {}, 2)
    assert answers[True] == answers[False]


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
