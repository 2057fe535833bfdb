"""A tiny Llama causal LM and a byte-level BPE tokenizer, built locally with no download.

Why: CI machines and the CPU "tiny preset" of ``train_grpo.py`` have no GPU and no model hub
(``HF_HUB_OFFLINE=1``), yet the training pipeline needs a real ``transformers`` checkpoint to load, quantise
(bitsandbytes NF4), wrap with LoRA and sample from. This module makes one: random weights, a tokenizer
trained on the text the policy will see (scenario JSON, optimal plans, the prompts), and a Llama-3-style chat
template.

Run it:

    python -m fleet_rl.tiny_model --output_dir outputs/models/tiny-fleet-llama          # no-op if built
    python -m fleet_rl.tiny_model --output_dir outputs/models/tiny-fleet-llama --force  # rebuild

It prints one JSON line: ``{"path": ..., "num_params": ..., ...}``. From Python, the training script
calls ``ensure_tiny_model(path)`` before ``from_pretrained(path)``; the first call builds, later calls return
at once. Concurrent callers (``accelerate launch`` with several processes) are safe: the build holds a lock
file and goes into a temporary sibling directory that is renamed in place, so readers never see half a model.

The model, openly:
- random initialisation (``torch.manual_seed(seed)``): it writes noise, not plans, until trained;
- 4 layers, hidden size 128, 4 query / 2 key-value heads (grouped-query attention), SwiGLU MLP of 256,
  untied embeddings, float32: 0.89 M parameters with the default corpus (vocabulary of 1164 tokens). With
  2 layers a 600-step warm start wrote valid JSON for under half the held-out prompts; 4 layers, all;
- hidden size >= 64 because bitsandbytes NF4 quantisation on a CPU needs it.

The tokenizer, openly:
- byte-level BPE (GPT-2 pre-tokenizer regex, ByteLevel decoder), so any unicode text round-trips exactly;
  ``vocab_size`` is an upper bound: merges stop once every word of the corpus seen twice is one token
  (1164 tokens for the default corpus), because the domain's vocabulary is small. An optimal plan's JSON
  takes about one token per 2.8 characters, a compact-style prompt about one per 3.4;
- special tokens ``<|begin_of_text|>`` (bos), ``<|eot_id|>`` (eos and end of every chat turn), ``<|pad|>``,
  ``<|start_header_id|>``, ``<|end_header_id|>``; no post-processor, so ``tokenizer(text)`` adds no bos:
  the chat template writes it, and nothing gets it twice;
- left padding (GRPO generates from left-padded prompts);
- the chat template marks each assistant turn (content and its ``<|eot_id|>``) with ``{% generation %}``, so
  TRL's SFT ``assistant_only_loss=True`` trains on the answers only.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from fleet_rl.atomic_dir import build_directory
from fleet_rl.catalog import GPUS, MODELS
from fleet_rl.kernel import solve
from fleet_rl.prompts import build_messages, format_answer
from fleet_rl.scenario_generator import JOB_NAMES, TASKS, make_scenario

__all__ = [
    "BOS_TOKEN",
    "CHAT_TEMPLATE",
    "DEFAULT_TINY_MODEL_DIR",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "build_tiny_model",
    "build_tokenizer",
    "default_corpus",
    "ensure_tiny_model",
    "is_tiny_model_dir",
    "main",
]

logger = logging.getLogger(__name__)

DEFAULT_TINY_MODEL_DIR = "outputs/models/tiny-fleet-llama"  # relative to the current directory (repo root)

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|eot_id|>"  # also ends every chat turn
PAD_TOKEN = "<|pad|>"
START_HEADER_TOKEN = "<|start_header_id|>"
END_HEADER_TOKEN = "<|end_header_id|>"
SPECIAL_TOKENS: tuple[str, ...] = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, START_HEADER_TOKEN, END_HEADER_TOKEN)

# Llama 3 layout, without Llama 3's ``| trim`` so message content is kept byte for byte. The assistant header
# stays outside {% generation %}; the content and its <|eot_id|> are inside (the model must learn to stop).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{%- generation %}{{- message['content'] + '<|eot_id|>' }}{%- endgeneration %}"
    "{%- else %}"
    "{{- message['content'] + '<|eot_id|>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{%- endif %}"
)

MIN_HIDDEN_SIZE = 64  # bitsandbytes NF4 on a CPU needs at least this
_BYTE_ALPHABET_SIZE = 256
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def _scenario_texts(num_scenarios: int) -> Iterator[str]:
    """Texts of scenarios k < num_scenarios: task TASKS[k % len(TASKS)], seed k // len(TASKS), train split."""
    for index in range(num_scenarios):
        scenario = make_scenario(TASKS[index % len(TASKS)], seed=index // len(TASKS))
        plan = solve(scenario).plan
        yield scenario.to_json()
        yield json.dumps(plan)
        yield format_answer(plan)  # the assistant's answer as the prompts ask for it
        for style in ("full", "compact"):
            for message in build_messages(scenario, style=style):
                yield message["content"]


def default_corpus(num_scenarios: int = 200) -> list[str]:
    """The text the tiny model will see, for training its tokenizer. Deterministic.

    For ``num_scenarios`` train-split scenarios spread round-robin over ``TASKS``: the scenario JSON, the
    kernel's optimal plan as JSON (``json.dumps``) and as the fenced answer, and the contents of the chat
    messages in both prompt styles. Plus one line naming every catalog GPU and model (held-out names too:
    they are vocabulary, not answers)."""
    if num_scenarios < 1:
        raise ValueError(f"num_scenarios must be >= 1, got {num_scenarios}")
    catalog_line = " ".join([*GPUS, *MODELS])
    return [catalog_line, *_scenario_texts(num_scenarios)]


def build_tokenizer(
    corpus: Iterable[str],
    vocab_size: int = 2048,
    model_max_length: int = 4096,
    atomic_words: Iterable[str] = JOB_NAMES,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE of at most ``vocab_size`` tokens (specials and 256 bytes included).

    Special tokens take ids 0-4 in ``SPECIAL_TOKENS`` order. ``atomic_words`` (the generator's job ids)
    become single added tokens: a plan must repeat the scenario's ids exactly, and copying one token is
    far easier for a tiny model than copying the 2-3 BPE pieces "style-adapter" splits into (the byte-level
    pre-tokenizer cuts at "-"). Returns a ``PreTrainedTokenizerFast`` with bos/eos/pad set, left padding,
    ``model_max_length`` and the chat template ``CHAT_TEMPLATE``."""
    minimum_vocab_size = _BYTE_ALPHABET_SIZE + len(SPECIAL_TOKENS)
    if vocab_size < minimum_vocab_size:
        raise ValueError(f"vocab_size must be >= {minimum_vocab_size} (bytes + specials), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    tokenizer.add_tokens([AddedToken(word, normalized=False) for word in atomic_words])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        padding_side="left",
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # decode must not touch spaces: exact round trip
        chat_template=CHAT_TEMPLATE,
    )


def is_tiny_model_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a complete checkpoint: config.json, tokenizer files and weights."""
    path = Path(path)
    return (
        (path / "config.json").is_file()
        and (path / "tokenizer.json").is_file()
        and (path / "tokenizer_config.json").is_file()
        and any((path / name).is_file() for name in _WEIGHT_FILES)
    )


def _check_shape(hidden_size: int, num_heads: int, num_kv_heads: int) -> None:
    if hidden_size < MIN_HIDDEN_SIZE:
        raise ValueError(f"hidden_size must be >= {MIN_HIDDEN_SIZE} (NF4 on a CPU), got {hidden_size}")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    if (hidden_size // num_heads) % 2:
        raise ValueError(f"head dimension {hidden_size // num_heads} must be even (rotary embeddings)")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")


def _write_checkpoint(
    directory: Path,
    *,
    corpus: Iterable[str] | None,
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    intermediate_size: int,
    max_position_embeddings: int,
    seed: int,
) -> None:
    """Train the tokenizer, initialise the model and save both into ``directory``."""
    tokenizer = build_tokenizer(
        default_corpus() if corpus is None else corpus,
        vocab_size=vocab_size,
        model_max_length=max_position_embeddings,
    )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def build_tiny_model(
    path: str | os.PathLike,
    *,
    corpus: Iterable[str] | None = None,
    vocab_size: int = 2048,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 256,
    max_position_embeddings: int = 4096,
    seed: int = 0,
) -> Path:
    """Build (or rebuild) the tiny model and tokenizer at ``path``; returns the absolute path.

    ``corpus`` trains the tokenizer (default: ``default_corpus()``). An existing checkpoint at ``path`` is
    replaced atomically; a non-empty directory that is not a checkpoint raises ``FileExistsError``."""
    options = {key: value for key, value in locals().items() if key != "path"}
    return _build_locked(Path(path).absolute(), replace=True, options=options)


def ensure_tiny_model(path: str | os.PathLike = DEFAULT_TINY_MODEL_DIR, **kwargs) -> Path:
    """Return the absolute ``path``, building the tiny model there first if it is missing.

    ``kwargs`` are ``build_tiny_model``'s; they only matter for the first build (an existing checkpoint is
    returned as it is, whatever its shape). Safe to call from several processes at once."""
    target = Path(path).absolute()
    if is_tiny_model_dir(target):
        return target
    arguments = inspect.signature(build_tiny_model).bind(target, **kwargs)  # TypeError on an unknown name
    arguments.apply_defaults()
    options = {key: value for key, value in arguments.arguments.items() if key != "path"}
    return _build_locked(target, replace=False, options=options)


def _build_locked(target: Path, *, replace: bool, options: dict) -> Path:
    """Build atomically under the lock unless (``replace`` is false and) a checkpoint is already there."""
    _check_shape(options["hidden_size"], options["num_heads"], options["num_kv_heads"])
    write = functools.partial(_write_checkpoint, **options)
    if build_directory(target, write, is_complete=is_tiny_model_dir, replace=replace, what="a tiny model"):
        logger.info("built tiny model at %s", target)
    return target


def main(argv: list[str] | None = None) -> None:
    """``python -m fleet_rl.tiny_model --output_dir DIR [--force] [--hidden_size N ...]``: one JSON line."""
    parser = argparse.ArgumentParser(description="Build the tiny Llama + tokenizer for CPU runs and tests.")
    parser.add_argument("--output_dir", default=DEFAULT_TINY_MODEL_DIR)
    parser.add_argument("--force", action="store_true", help="rebuild even if a checkpoint exists")
    parser.add_argument("--num_scenarios", type=int, default=200, help="scenarios in the tokenizer corpus")
    parser.add_argument("--vocab_size", type=int, default=2048)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--num_heads", type=int, default=4)
    parser.add_argument("--num_kv_heads", type=int, default=2)
    parser.add_argument("--intermediate_size", type=int, default=256)
    parser.add_argument("--max_position_embeddings", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    options = {
        "vocab_size": args.vocab_size,
        "hidden_size": args.hidden_size,
        "num_layers": args.num_layers,
        "num_heads": args.num_heads,
        "num_kv_heads": args.num_kv_heads,
        "intermediate_size": args.intermediate_size,
        "max_position_embeddings": args.max_position_embeddings,
        "seed": args.seed,
    }
    existed = is_tiny_model_dir(args.output_dir)
    if args.force or not existed:
        corpus = default_corpus(args.num_scenarios)
        build = build_tiny_model if args.force else ensure_tiny_model
        path = build(args.output_dir, corpus=corpus, **options)
    else:
        path = ensure_tiny_model(args.output_dir)
    model = LlamaForCausalLM.from_pretrained(path)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    report = {
        "path": str(path),
        "num_params": model.num_parameters(),
        "vocab_size": len(tokenizer),
        "hidden_size": model.config.hidden_size,
        "num_layers": model.config.num_hidden_layers,
        "built": args.force or not existed,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
