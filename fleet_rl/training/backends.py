"""How the policy is loaded: transformers + bitsandbytes + PEFT (any machine), or Unsloth (CUDA GPUs).

``load_policy`` returns the keyword arguments ``GRPOTrainer`` takes for the model, so ``train_grpo.py`` has
one code path for both backends:

- ``transformers``: the model stays a path; TRL loads it with ``model_init_kwargs`` (dtype, attention
  implementation, revision from ``ModelConfig``), quantises it with the ``BitsAndBytesConfig`` built from
  ``ModelConfig`` (``load_in_4bit``, ``bnb_4bit_quant_type: nf4``, ``use_bnb_nested_quant`` = double quant,
  compute dtype = ``dtype``) and wraps it in LoRA from ``get_peft_config`` (``lora_r``, ``lora_alpha``,
  ``lora_target_modules``...). This is QLoRA, and it runs on CPU too (the tiny preset).
- ``unsloth``: ``FastLanguageModel.from_pretrained(load_in_4bit=..., fast_inference=..., max_lora_rank=...)``
  then ``FastLanguageModel.get_peft_model``; the trainer gets the ready PEFT model and Unsloth's tokenizer.
  ``train_grpo.py`` imports unsloth before trl/transformers/peft (Unsloth patches them on import), and only
  when this backend is asked for and a GPU is present. Not testable without a GPU; the option checks are.
"""

from __future__ import annotations

from typing import Any

from fleet_rl.training.arguments import FleetScriptArguments

__all__ = ["DEFAULT_LORA_TARGETS", "load_policy"]

# Every linear layer of a Llama block (QLoRA paper: adapters on all linear layers match full fine-tuning).
DEFAULT_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _transformers_policy(model_path: str, model_args, training_args) -> dict[str, Any]:
    from transformers import AutoTokenizer
    from trl import get_peft_config, get_quantization_config

    model_init_kwargs = {
        "revision": model_args.model_revision,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs
    tokenizer = AutoTokenizer.from_pretrained(
        model_path, revision=model_args.model_revision, padding_side="left"
    )
    if model_args.use_peft and not model_args.lora_target_modules:
        model_args.lora_target_modules = DEFAULT_LORA_TARGETS
    return {
        "model": model_path,
        "processing_class": tokenizer,
        "quantization_config": get_quantization_config(model_args),
        "peft_config": get_peft_config(model_args),
    }


def _unsloth_policy(model_path: str, model_args, script_args: FleetScriptArguments, training_args) -> dict:
    from unsloth import FastLanguageModel  # already imported first by train_grpo.py

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=model_path,
        max_seq_length=script_args.max_seq_length,
        load_in_4bit=model_args.load_in_4bit,
        fast_inference=script_args.fast_inference,
        max_lora_rank=model_args.lora_r,
        gpu_memory_utilization=script_args.gpu_memory_utilization,
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules or DEFAULT_LORA_TARGETS,
        use_gradient_checkpointing="unsloth",  # Unsloth's offloaded checkpointing: long completions fit
        random_state=training_args.seed,
    )
    tokenizer.padding_side = "left"
    return {"model": model, "processing_class": tokenizer, "quantization_config": None, "peft_config": None}


def load_policy(
    model_path: str, script_args: FleetScriptArguments, training_args, model_args
) -> dict[str, Any]:
    """``GRPOTrainer`` keyword arguments for the policy: ``model``, ``processing_class``,
    ``quantization_config`` and ``peft_config`` (see the module docstring)."""
    if script_args.backend == "unsloth":
        return _unsloth_policy(model_path, model_args, script_args, training_args)
    return _transformers_policy(model_path, model_args, training_args)
