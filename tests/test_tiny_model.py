"""The local tiny Llama: builds once, loads offline, tokenizes exactly, trains under NF4 + LoRA on a CPU."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

from fleet_rl import TASKS, make_scenario
from fleet_rl.kernel import solve
from fleet_rl.prompts import build_messages
from fleet_rl.tiny_model import (
    DEFAULT_TINY_MODEL_DIR,
    build_tiny_model,
    build_tokenizer,
    default_corpus,
    ensure_tiny_model,
    is_tiny_model_dir,
    main,
)

SMALL_CORPUS_SCENARIOS = 20


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return default_corpus(SMALL_CORPUS_SCENARIOS)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, corpus) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus=corpus)


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def model(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir)


# --- building ---------------------------------------------------------------------------------------


def test_default_dir_is_relative_to_the_repo_root():
    assert DEFAULT_TINY_MODEL_DIR == "outputs/models/tiny-fleet-llama"


def test_default_corpus_is_deterministic_and_covers_every_task():
    first, second = default_corpus(4), default_corpus(4)
    assert first == second
    # Scenario k of 4 is task TASKS[k] with seed 0.
    assert all(make_scenario(task, seed=0).to_json() in first for task in TASKS)
    scenario = make_scenario("hard", seed=0)
    assert scenario.to_json() in first
    assert json.dumps(solve(scenario).plan) in first
    assert all(message["content"] in first for message in build_messages(scenario))


def test_build_makes_a_complete_checkpoint(model_dir):
    assert is_tiny_model_dir(model_dir)
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (model_dir / name).is_file()
    assert not list(model_dir.parent.glob(".model.tmp-*")), "temporary build directory left behind"


def test_is_tiny_model_dir_rejects_incomplete_directories(tmp_path, model_dir):
    assert not is_tiny_model_dir(tmp_path / "missing")
    (tmp_path / "config.json").write_text((model_dir / "config.json").read_text())
    assert not is_tiny_model_dir(tmp_path)  # no tokenizer, no weights


def test_ensure_a_second_time_does_not_rebuild(model_dir):
    mtime_ns = (model_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_model(model_dir, hidden_size=256) == model_dir  # shape arguments ignored when present
    assert (model_dir / "model.safetensors").stat().st_mtime_ns == mtime_ns


def test_build_refuses_to_overwrite_a_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(FileExistsError):
        build_tiny_model(tmp_path, corpus=["tiny corpus"])
    assert (tmp_path / "notes.txt").read_text() == "not a model"


@pytest.mark.parametrize(
    "shape", [{"hidden_size": 32}, {"hidden_size": 128, "num_heads": 3}, {"num_heads": 4, "num_kv_heads": 3}]
)
def test_bad_shapes_raise(tmp_path, shape):
    with pytest.raises(ValueError):
        build_tiny_model(tmp_path / "model", corpus=["tiny corpus"], **shape)


def test_ensure_rejects_unknown_arguments(tmp_path):
    with pytest.raises(TypeError):
        ensure_tiny_model(tmp_path / "model", hidden_dim=128)


# --- tokenizer --------------------------------------------------------------------------------------


def test_tokenizer_special_tokens_and_padding(tokenizer, model):
    assert tokenizer.bos_token == "<|begin_of_text|>" and tokenizer.bos_token_id == 0
    assert tokenizer.eos_token == "<|eot_id|>" and tokenizer.eos_token_id == 1
    assert tokenizer.pad_token == "<|pad|>" and tokenizer.pad_token_id == 2
    assert tokenizer.padding_side == "left"
    assert tokenizer.model_max_length == model.config.max_position_embeddings == 4096
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.eos_token_id == model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    plain_ids = tokenizer("plan", add_special_tokens=False)["input_ids"]
    assert tokenizer("plan")["input_ids"] == plain_ids  # no bos added: the chat template writes it
    batch = tokenizer(["a", "a much longer text"], padding=True)
    assert batch["input_ids"][0][0] == tokenizer.pad_token_id and batch["attention_mask"][0][0] == 0


def test_tokenizer_training_is_deterministic(corpus, tokenizer):
    assert build_tokenizer(corpus).get_vocab() == tokenizer.get_vocab()


def test_chat_template_renders_llama3_layout(tokenizer):
    messages = [{"role": "system", "content": "Plan."}, {"role": "user", "content": '{"jobs": []}'}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|begin_of_text|>"
        "<|start_header_id|>system<|end_header_id|>\n\nPlan.<|eot_id|>"
        '<|start_header_id|>user<|end_header_id|>\n\n{"jobs": []}<|eot_id|>'
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id


def test_chat_template_masks_the_assistant_answer_and_its_stop_token(tokenizer):
    from trl import chat_template_utils

    messages = [
        {"role": "user", "content": "Plan it."},
        {"role": "assistant", "content": '{"jobs": [{"id": "chat", "gpus": 2}]}'},
    ]
    rendered = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    masked = [i for i, m in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(masked) == '{"jobs": [{"id": "chat", "gpus": 2}]}<|eot_id|>'
    # What TRL's SFT checks for assistant_only_loss and its tool-calling paths check.
    assert chat_template_utils.is_chat_template_stop_token_trained(tokenizer)
    assert chat_template_utils.is_chat_template_prefix_preserving(tokenizer)


def test_plan_json_round_trips_and_compresses(tokenizer):
    plan_text = json.dumps(solve(make_scenario("medium", seed=123)).plan, indent=1)  # unseen seed, newlines
    ids = tokenizer.encode(plan_text, add_special_tokens=False)
    assert tokenizer.decode(ids) == plan_text
    assert len(ids) < 0.5 * len(plan_text), (len(ids), len(plan_text))


@settings(max_examples=50, deadline=None)
@given(text=st.text())
def test_any_text_round_trips_exactly(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


# --- model ------------------------------------------------------------------------------------------


def test_forward_logits_shape_and_generate(tokenizer, model):
    assert model.config.hidden_size >= 64 and not model.config.tie_word_embeddings
    assert model.dtype == torch.float32
    batch = tokenizer(['{"jobs": [', "{"], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (2, batch["input_ids"].shape[1], len(tokenizer))  # (batch, seq, vocab)
    prompt_length = batch["input_ids"].shape[1]
    output = model.generate(**batch, max_new_tokens=4, do_sample=False)
    assert output.shape[0] == 2 and prompt_length < output.shape[1] <= prompt_length + 4


def test_nf4_lora_forward_backward_on_cpu(model_dir, tokenizer):
    from peft import LoraConfig, get_peft_model

    quantization = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.float32,
    )
    base = AutoModelForCausalLM.from_pretrained(model_dir, quantization_config=quantization)
    assert type(base.model.layers[0].mlp.up_proj).__name__ == "Linear4bit"
    peft_model = get_peft_model(base, LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    batch = tokenizer(['{"jobs": [{"id": "chat"}]}', "{}"], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    loss = peft_model(**batch, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    lora_b_grads = [p.grad for name, p in peft_model.named_parameters() if "lora_B" in name]
    # lora_B starts at zero, so lora_A's gradient is zero after one step; lora_B's must not be.
    assert lora_b_grads and all(g is not None and g.abs().sum() > 0 for g in lora_b_grads)


# --- concurrency and the command line ---------------------------------------------------------------


def test_concurrent_ensure_from_two_processes(tmp_path):
    target = tmp_path / "shared"
    target.mkdir()  # an empty directory, e.g. created by the launcher
    context = multiprocessing.get_context("spawn")
    options = {"corpus": default_corpus(4), "hidden_size": 64}
    processes = [context.Process(target=ensure_tiny_model, args=(target,), kwargs=options) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0, 0]
    assert is_tiny_model_dir(target)
    assert AutoModelForCausalLM.from_pretrained(target).config.hidden_size == 64
    assert sorted(path.name for path in tmp_path.iterdir()) == [".shared.lock", "shared"]  # no temp dirs


def test_main_prints_one_json_line(tmp_path, capsys):
    output_dir = tmp_path / "cli-model"
    main(["--output_dir", str(output_dir), "--num_scenarios", "4", "--hidden_size", "64", "--num_heads", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["path"] == str(output_dir) and report["built"] is True
    assert report["hidden_size"] == 64 and report["num_params"] > 0
    main(["--output_dir", str(output_dir)])  # second call: no rebuild
    again = json.loads(capsys.readouterr().out)
    assert again["built"] is False and again["num_params"] == report["num_params"]
