"""The model table: architecture dimensions copied from each model's Hugging Face ``config.json``.

Parameter counts per module group are derived from the dimensions, never typed in; the simplifications are
in ``fleet_rl.catalog``'s docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from fleet_rl.catalog.formats import MODULE_GROUPS, read_only_index

__all__ = ["MODELS", "ModelSpec"]


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, from its HF ``config.json``; parameter counts are derived properties.

    Per layer: an attention block (q, k, v, o projections), an MLP block (``num_experts`` experts, each
    gate/up/down when ``gated_mlp`` else up/down, plus a router when ``num_experts > 1``) and two norms;
    one final norm; token embeddings (plus learned position embeddings for GPT-2); an LM head that is the
    embedding matrix when ``tie_word_embeddings``.
    """

    name: str  # catalog key
    hf_id: str  # Hugging Face repository id the dimensions come from
    hidden_size: int
    intermediate_size: int  # per expert for MoE models
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    num_experts: int = 1
    experts_per_token: int = 1
    head_dim: int | None = None  # default hidden_size // num_attention_heads
    gated_mlp: bool = True  # SwiGLU (gate, up, down) vs GPT-2 (up, down)
    attention_bias: bool = False  # biases on q, k, v (Qwen2.5, GPT-2)
    mlp_bias: bool = False  # biases on every MLP projection (GPT-2)
    learned_position_embeddings: bool = False  # GPT-2 wpe: max_position_embeddings x hidden_size
    layernorm: bool = False  # LayerNorm (weight + bias) vs RMSNorm (weight only)
    attention_output_bias: bool = False  # bias on the o projection (GPT-2 attn.c_proj; not Qwen2.5)

    def __post_init__(self) -> None:
        dims = {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_layers": self.num_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
        }
        for key, value in dims.items():
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{self.name}: {key} must be a positive int, got {value!r}")
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"{self.name}: experts_per_token exceeds num_experts")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.name}: num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"{self.name}: hidden_size not divisible by heads; give head_dim explicitly")
        if self.head_dim is not None and self.head_dim <= 0:
            raise ValueError(f"{self.name}: head_dim must be positive")

    @property
    def head_dim_(self) -> int:
        """Resolved head dimension."""
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    # Per-layer building blocks (stored parameters).

    @property
    def _attention_params_per_layer(self) -> int:
        q_dim = self.num_attention_heads * self.head_dim_
        kv_dim = self.num_key_value_heads * self.head_dim_
        weights = self.hidden_size * (q_dim + 2 * kv_dim) + q_dim * self.hidden_size  # q, k, v, o
        qkv_biases = q_dim + 2 * kv_dim if self.attention_bias else 0
        output_bias = self.hidden_size if self.attention_output_bias else 0
        return weights + qkv_biases + output_bias

    @property
    def _params_per_expert(self) -> int:
        matrices = 3 if self.gated_mlp else 2
        weights = matrices * self.hidden_size * self.intermediate_size
        biases = (matrices - 1) * self.intermediate_size + self.hidden_size if self.mlp_bias else 0
        return weights + biases

    @property
    def _router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts if self.num_experts > 1 else 0

    @property
    def _params_per_norm(self) -> int:
        return self.hidden_size * (2 if self.layernorm else 1)

    # Derived counts.

    @cached_property
    def params_by_group(self) -> Mapping[str, int]:
        """Stored parameters per module group (all experts; ``lm_head`` is 0 when tied)."""
        embedding = self.vocab_size * self.hidden_size
        if self.learned_position_embeddings:
            embedding += self.max_position_embeddings * self.hidden_size
        mlp = self.num_layers * (self.num_experts * self._params_per_expert + self._router_params_per_layer)
        counts = {
            "embedding": embedding,
            "attention": self.num_layers * self._attention_params_per_layer,
            "mlp": mlp,
            "norm": (2 * self.num_layers + 1) * self._params_per_norm,
            "lm_head": 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size,
        }
        return MappingProxyType({group: counts[group] for group in MODULE_GROUPS})

    @cached_property
    def gemm_params_by_group(self) -> Mapping[str, int]:
        """Parameters taking part in a matmul for one token (active experts only; the head even if tied)."""
        active_mlp = self.experts_per_token * self._params_per_expert + self._router_params_per_layer
        counts = {
            "embedding": 0,  # a lookup, not a GEMM
            "attention": self.params_by_group["attention"],
            "mlp": self.num_layers * active_mlp,
            "norm": 0,  # elementwise
            "lm_head": self.vocab_size * self.hidden_size,
        }
        return MappingProxyType({group: counts[group] for group in MODULE_GROUPS})

    @cached_property
    def num_params(self) -> int:
        """Total stored parameters."""
        return sum(self.params_by_group.values())

    @cached_property
    def num_active_params(self) -> int:
        """Parameters used per token: everything stored except the experts a token is not routed to."""
        inactive_experts = self.num_experts - self.experts_per_token
        return self.num_params - self.num_layers * inactive_experts * self._params_per_expert

    def kv_cache_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """K and V for every layer: 2 * layers * kv_heads * head_dim * bytes_per_element."""
        return 2.0 * self.num_layers * self.num_key_value_heads * self.head_dim_ * bytes_per_element


MODELS: Mapping[str, ModelSpec] = read_only_index(
    (
        ModelSpec(
            name="llama-3.1-8b",
            hf_id="meta-llama/Llama-3.1-8B",
            hidden_size=4096,  # meta-llama/Llama-3.1-8B config.json
            intermediate_size=14336,  # meta-llama/Llama-3.1-8B config.json
            num_layers=32,  # meta-llama/Llama-3.1-8B config.json num_hidden_layers
            num_attention_heads=32,  # meta-llama/Llama-3.1-8B config.json
            num_key_value_heads=8,  # meta-llama/Llama-3.1-8B config.json
            vocab_size=128256,  # meta-llama/Llama-3.1-8B config.json
            max_position_embeddings=131072,  # meta-llama/Llama-3.1-8B config.json
            tie_word_embeddings=False,  # meta-llama/Llama-3.1-8B config.json
        ),
        ModelSpec(
            name="llama-3.1-70b",
            hf_id="meta-llama/Llama-3.1-70B",
            hidden_size=8192,  # meta-llama/Llama-3.1-70B config.json
            intermediate_size=28672,  # meta-llama/Llama-3.1-70B config.json
            num_layers=80,  # meta-llama/Llama-3.1-70B config.json num_hidden_layers
            num_attention_heads=64,  # meta-llama/Llama-3.1-70B config.json
            num_key_value_heads=8,  # meta-llama/Llama-3.1-70B config.json
            vocab_size=128256,  # meta-llama/Llama-3.1-70B config.json
            max_position_embeddings=131072,  # meta-llama/Llama-3.1-70B config.json
            tie_word_embeddings=False,  # meta-llama/Llama-3.1-70B config.json
        ),
        ModelSpec(
            name="mistral-7b",
            hf_id="mistralai/Mistral-7B-v0.1",
            hidden_size=4096,  # mistralai/Mistral-7B-v0.1 config.json
            intermediate_size=14336,  # mistralai/Mistral-7B-v0.1 config.json
            num_layers=32,  # mistralai/Mistral-7B-v0.1 config.json num_hidden_layers
            num_attention_heads=32,  # mistralai/Mistral-7B-v0.1 config.json
            num_key_value_heads=8,  # mistralai/Mistral-7B-v0.1 config.json
            vocab_size=32000,  # mistralai/Mistral-7B-v0.1 config.json
            max_position_embeddings=32768,  # mistralai/Mistral-7B-v0.1 config.json (sliding window 4096)
            tie_word_embeddings=False,  # mistralai/Mistral-7B-v0.1 config.json
        ),
        ModelSpec(
            name="qwen2.5-7b",
            hf_id="Qwen/Qwen2.5-7B",
            hidden_size=3584,  # Qwen/Qwen2.5-7B config.json
            intermediate_size=18944,  # Qwen/Qwen2.5-7B config.json
            num_layers=28,  # Qwen/Qwen2.5-7B config.json num_hidden_layers
            num_attention_heads=28,  # Qwen/Qwen2.5-7B config.json
            num_key_value_heads=4,  # Qwen/Qwen2.5-7B config.json
            vocab_size=152064,  # Qwen/Qwen2.5-7B config.json
            max_position_embeddings=131072,  # Qwen/Qwen2.5-7B config.json
            tie_word_embeddings=False,  # Qwen/Qwen2.5-7B config.json
            attention_bias=True,  # Qwen2 architecture (transformers Qwen2Attention): q/k/v bias, no o bias
        ),
        ModelSpec(
            name="qwen2.5-72b",
            hf_id="Qwen/Qwen2.5-72B",
            hidden_size=8192,  # Qwen/Qwen2.5-72B config.json
            intermediate_size=29568,  # Qwen/Qwen2.5-72B config.json
            num_layers=80,  # Qwen/Qwen2.5-72B config.json num_hidden_layers
            num_attention_heads=64,  # Qwen/Qwen2.5-72B config.json
            num_key_value_heads=8,  # Qwen/Qwen2.5-72B config.json
            vocab_size=152064,  # Qwen/Qwen2.5-72B config.json
            max_position_embeddings=131072,  # Qwen/Qwen2.5-72B config.json
            tie_word_embeddings=False,  # Qwen/Qwen2.5-72B config.json
            attention_bias=True,  # Qwen2 architecture (transformers Qwen2Attention): q/k/v bias, no o bias
        ),
        ModelSpec(
            name="mixtral-8x7b",
            hf_id="mistralai/Mixtral-8x7B-v0.1",
            hidden_size=4096,  # mistralai/Mixtral-8x7B-v0.1 config.json
            intermediate_size=14336,  # mistralai/Mixtral-8x7B-v0.1 config.json (per expert)
            num_layers=32,  # mistralai/Mixtral-8x7B-v0.1 config.json num_hidden_layers
            num_attention_heads=32,  # mistralai/Mixtral-8x7B-v0.1 config.json
            num_key_value_heads=8,  # mistralai/Mixtral-8x7B-v0.1 config.json
            vocab_size=32000,  # mistralai/Mixtral-8x7B-v0.1 config.json
            max_position_embeddings=32768,  # mistralai/Mixtral-8x7B-v0.1 config.json
            tie_word_embeddings=False,  # mistralai/Mixtral-8x7B-v0.1 config.json
            num_experts=8,  # mistralai/Mixtral-8x7B-v0.1 config.json num_local_experts
            experts_per_token=2,  # mistralai/Mixtral-8x7B-v0.1 config.json num_experts_per_tok
        ),
        ModelSpec(
            name="gpt2",
            hf_id="openai-community/gpt2",
            hidden_size=768,  # openai-community/gpt2 config.json n_embd
            intermediate_size=3072,  # openai-community/gpt2 config.json n_inner null -> 4 * n_embd
            num_layers=12,  # openai-community/gpt2 config.json n_layer
            num_attention_heads=12,  # openai-community/gpt2 config.json n_head
            num_key_value_heads=12,  # openai-community/gpt2 config.json: multi-head attention (no GQA)
            vocab_size=50257,  # openai-community/gpt2 config.json
            max_position_embeddings=1024,  # openai-community/gpt2 config.json n_positions
            tie_word_embeddings=True,  # openai-community/gpt2: lm_head shares wte
            gated_mlp=False,  # GPT-2 MLP: c_fc, gelu, c_proj
            attention_bias=True,  # GPT-2 attn.c_attn (q, k, v) has a bias
            attention_output_bias=True,  # GPT-2 attn.c_proj has a bias
            mlp_bias=True,  # GPT-2 mlp.c_fc and mlp.c_proj have biases
            learned_position_embeddings=True,  # GPT-2 wpe
            layernorm=True,  # GPT-2 ln_1, ln_2, ln_f are LayerNorm (weight + bias)
        ),
    )
)
