"""A model as the performance model sees it: its shape from its config.json, the weights a step reads in a
given number format, the KV cache a token takes and the attention arithmetic it costs."""

from __future__ import annotations

from dataclasses import dataclass

from harness.devices.formats import Format, weight_format

BF16_BYTES = 2  # the embedding table and the LM head stay bf16 in every format's checkpoint


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    params_b: float  # all parameters, embedding included
    vocab: int
    active_params_b: float | None = None  # mixture-of-experts: parameters one token touches
    experts: int = 1
    top_k: int = 1
    max_model_len: int = 131072
    intermediate: int | None = None  # MLP width (of one expert); None: 3.5 × hidden, as Llama's
    weights: str = "bf16"  # the format its checkpoint ships in: what `weights: auto` means
    # Which weights a format stores: "linear" (every matmul's) or "experts" (gpt-oss: MXFP4 experts, the
    # attention and router bf16, as its checkpoint ships)
    quantised: str = "linear"
    # Multi-head latent attention (DeepSeek-V3): the latent a token caches per layer (kv_lora_rank + the rope
    # dimensions, one copy whatever the heads), the latent rank the absorbed value projection reads, and the
    # rope dimensions a prompt's query-key product adds to head_dim. 0: K and V cached per kv head.
    kv_latent: int = 0
    latent_rank: int = 0
    qk_rope: int = 0
    # Layers that attend only a sliding window of the last tokens (gpt-oss: every other, 128 tokens): their KV
    # is a window's a request whatever its length, left out of the per-token KV and its reads (vLLM's hybrid
    # cache).
    sliding_layers: int = 0

    @property
    def full_layers(self) -> int:
        """Layers whose KV grows with the context."""
        return self.layers - self.sliding_layers

    @property
    def mlp_width(self) -> int:
        return self.intermediate if self.intermediate is not None else round(3.5 * self.hidden)

    @property
    def embedding_params(self) -> float:
        return float(self.vocab * self.hidden)

    @property
    def active_params(self) -> float:
        """Parameters one token multiplies with: LM head included, embedding table not."""
        active = self.active_params_b if self.active_params_b is not None else self.params_b
        return active * 1e9 - self.embedding_params

    @property
    def expert_params(self) -> float:
        """Parameters of one expert summed over layers (0 for dense models)."""
        if self.experts <= 1 or self.active_params_b is None:
            return 0.0
        return (self.params_b - self.active_params_b) * 1e9 / (self.experts - self.top_k)

    def weight_params_read(self, tokens: int) -> float:
        """Parameters read in a step of `tokens` tokens.

        Dense: all of them. Mixture of experts: the shared part plus each expert that at least one
        token routes to; with uniform top-k routing, E·(1 − (1 − k/E)^T) experts per layer are touched.
        """
        return self.active_params - self.top_k * self.expert_params + self.expert_params_read(tokens)

    def expert_params_read(self, tokens: int) -> float:
        """The experts' share of `weight_params_read` (0 for dense models)."""
        e, k = self.experts, self.top_k
        return e * (1 - (1 - k / e) ** max(tokens, 1)) * self.expert_params if self.expert_params else 0.0

    def format(self, weights: str) -> Format:
        """The format `weights` names; "auto" is the checkpoint's own."""
        return weight_format(self.weights if weights == "auto" else weights)

    def _bytes_each(self, fmt: Format) -> tuple[float, float]:
        """(bytes a dense layer's weight takes, bytes an expert's weight takes) in `fmt`."""
        stored = fmt.bits / 8
        return (stored if self.quantised == "linear" else BF16_BYTES), stored

    def weight_bytes_read(self, tokens: int, fmt: Format) -> tuple[float, float]:
        """(all the bytes of weights a step of `tokens` tokens reads, the experts' share of them)."""
        dense_b, expert_b = self._bytes_each(fmt)
        experts = self.expert_params_read(tokens)
        dense = self.weight_params_read(tokens) - experts - self.embedding_params  # the LM head aside
        return dense * dense_b + experts * expert_b + self.embedding_params * BF16_BYTES, experts * expert_b

    def weight_bytes(self, fmt: Format) -> float:
        """Every weight's bytes in `fmt`: what the devices' memory holds."""
        dense_b, expert_b = self._bytes_each(fmt)
        experts = self.expert_params * self.experts
        dense = self.params_b * 1e9 - experts - 2 * self.embedding_params  # embedding and LM head aside
        return dense * dense_b + experts * expert_b + 2 * self.embedding_params * BF16_BYTES

    def kv_bytes_per_token(self, dtype_bytes: float) -> float:
        if self.kv_latent:
            return self.full_layers * self.kv_latent * dtype_bytes
        return 2 * self.full_layers * self.kv_heads * self.head_dim * dtype_bytes

    def kv_split(self, tp: int) -> int:
        """Over how many of `tp` ranks a token's KV cache is divided: a kv head each at most (vLLM replicates
        them beyond); MLA's one latent is held whole on every rank."""
        return 1 if self.kv_latent else max(1, min(tp, self.kv_heads))

    def attention_flops(self, decode_context: float, prefill_attn: float) -> float:
        """Attention's arithmetic for decodes reading `decode_context` tokens in all and prompt chunks of Σ
        q·(p + q/2) query-key pairs: QKᵀ and PV, 2 FLOPs a multiply-add. MLA decodes absorbed (over the latent
        and its rope dims, then the latent rank) and prefills as plain attention (head_dim + rope, then
        head_dim)."""
        if self.kv_latent:
            decode = 2 * self.q_heads * (self.kv_latent + self.latent_rank)
            prefill = 2 * self.q_heads * (2 * self.head_dim + self.qk_rope)
        else:
            decode = prefill = 4 * self.q_heads * self.head_dim
        return self.full_layers * (decode * decode_context + prefill * prefill_attn)
