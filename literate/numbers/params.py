"""How many parameters a layer has, and how many bytes its KV cache needs: formulas,
each checked against `.numel()` and against real storage in the tests.

Chapter 3 starts this module with attention; later chapters add the FFN and whole blocks.

Shapes: d = d_model, H query heads, H_kv key/value heads, d_head = d / H.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from literate.parts.checks import positive_int

__all__ = [
    "PUBLISHED_ATTENTION",
    "CacheShape",
    "GPT2ParamCount",
    "PublishedAttention",
    "attention_kind",
    "attention_params",
    "cache_bytes",
    "cache_bytes_per_token_per_layer",
    "gpt2_params",
    "interleaved_windows",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "kv_cache_shape",
    "latent_cache_shape",
]


# --8<-- [start:attention_params]
def attention_params(d_model: int, n_heads: int, n_kv_heads: int,
                     bias: bool = False) -> int:
    """Parameters of multi-head attention with `n_kv_heads` key/value heads.

    W_q and W_o are d x d each; W_k and W_v are d x (n_kv_heads * d_head) each, which is
    d^2 * n_kv_heads / n_heads. Without biases: 2 d^2 (1 + n_kv_heads / n_heads), so
    4 d^2 for MHA whatever the number of heads. Biases add d + 2 n_kv_heads d_head + d.
    Integer arithmetic throughout: the count is exact.
    """
    d_model = positive_int("d_model", d_model)
    n_heads = positive_int("n_heads", n_heads)
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    if not isinstance(bias, bool):
        raise TypeError(f"bias must be a bool, got {type(bias).__name__}")
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be divisible by "
                         f"n_kv_heads={n_kv_heads}")
    d_kv = n_kv_heads * (d_model // n_heads)  # width of K (and of V)
    weights = 2 * d_model * d_model + 2 * d_model * d_kv  # W_q, W_o; W_k, W_v
    biases = 2 * d_model + 2 * d_kv if bias else 0
    return weights + biases
# --8<-- [end:attention_params]


# --8<-- [start:kv_cache_bytes_per_token]
def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int,
                             bytes_per_value: int) -> int:
    """Bytes one token adds to a model's KV cache: 2 (K and V) x layers x n_kv_heads x
    d_head x bytes per value (2 for fp16/bf16). Query heads do not appear: only the
    key/value heads are stored."""
    n_layers = positive_int("n_layers", n_layers)
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    d_head = positive_int("d_head", d_head)
    bytes_per_value = positive_int("bytes_per_value", bytes_per_value)
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value
# --8<-- [end:kv_cache_bytes_per_token]


# --8<-- [start:kv_cache_bytes]
def kv_cache_bytes(windows: Sequence[int | None], n_kv_heads: int, d_head: int,
                   bytes_per_value: int, context: int, *, batch: int = 1) -> int:
    """Bytes of a model's KV cache for a context of `context` tokens, `batch` rows:
    per layer 2 (K and V) x n_kv_heads x d_head x bytes per value for each position it
    keeps, every one of the `context` for a global layer (window None) and
    min(window, context) for a windowed one, a ring of that many slots (chapter 10).
    Per token of context, a global layer costs 2 n_kv_heads d_head bytes_per_value; a
    windowed layer nothing more once the context is past its window."""
    windows = list(windows)
    if not windows:
        raise ValueError("windows must give one entry per layer (None: global)")
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    d_head = positive_int("d_head", d_head)
    per_position = 2 * n_kv_heads * d_head * positive_int("bytes_per_value",
                                                          bytes_per_value)
    context, batch = positive_int("context", context), positive_int("batch", batch)
    kept = sum(context if w is None else min(positive_int("window", w), context)
               for w in windows)  # positions held, summed over the layers
    return batch * per_position * kept
# --8<-- [end:kv_cache_bytes]


# --8<-- [start:cache_ledger]
@dataclass(frozen=True)
class CacheShape:
    """What one model's cache keeps, layer by layer (chapter 10's ledger).

    `windows` has one entry per layer: None for a layer that keeps every position, W
    for a sliding-window layer, a ring of W slots. `width` is how many values one
    position costs in one layer: 2 H_kv d_head (a key and a value per key/value head)
    for MHA, GQA and MQA, kv_lora_rank + d_rope (the latent and the shared RoPE key)
    for MLA. `kind` names the attention: "MHA", "GQA", "MQA", "MLA", with
    "+ sliding" or "+ local/global" when some layers have a window."""

    name: str
    kind: str
    windows: tuple[int | None, ...]
    width: int
    source: str = ""

    @property
    def n_layers(self) -> int:
        return len(self.windows)

    @property
    def global_layers(self) -> int:
        """Layers whose cache grows with the context."""
        return sum(w is None for w in self.windows)


def attention_kind(n_heads: int, n_kv_heads: int) -> str:
    """"MHA" when every query head has its own key/value head, "MQA" when one is
    shared by all, "GQA" in between (chapter 3)."""
    n_heads = positive_int("n_heads", n_heads)
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must be divisible by "
                         f"n_kv_heads={n_kv_heads}")
    return "MHA" if n_kv_heads == n_heads else "MQA" if n_kv_heads == 1 else "GQA"


def interleaved_windows(n_layers: int, window: int | None, *,
                        every: int = 0) -> tuple[int | None, ...]:
    """One window per layer: every `every`-th layer global (None), the others `window`.
    every=0: no global layer, the window everywhere (Mistral 7B v0.1); Gemma 3:
    every=6, five local layers then a global one; gpt-oss: every=2, local first.
    window None: every layer global."""
    n_layers = positive_int("n_layers", n_layers)
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
        raise ValueError(f"every must be an int >= 0, got {every!r}")
    if window is None:
        return (None,) * n_layers
    window = positive_int("window", window)
    return tuple(None if every and (i + 1) % every == 0 else window
                 for i in range(n_layers))


def kv_cache_shape(name: str, *, n_layers: int, n_heads: int, n_kv_heads: int,
                   d_head: int, window: int | None = None, every: int = 0,
                   source: str = "") -> CacheShape:
    """The cache of a model with keys and values per key/value head (MHA, GQA or MQA),
    optionally windowed as `interleaved_windows(n_layers, window, every=every)`."""
    kind = attention_kind(n_heads, n_kv_heads)
    windows = interleaved_windows(n_layers, window, every=every)
    if any(w is not None for w in windows):
        kind += " + local/global" if None in windows else " + sliding"
    width = 2 * n_kv_heads * positive_int("d_head", d_head)  # a key and a value
    return CacheShape(name, kind, windows, width, source)


def latent_cache_shape(name: str, *, n_layers: int, kv_lora_rank: int,
                       qk_rope_head_dim: int, source: str = "") -> CacheShape:
    """The cache of an MLA model: per layer and position the latent c_kv
    [kv_lora_rank] and the decoupled RoPE key [qk_rope_head_dim], whatever the head
    count (chapter 10's `LatentCache`)."""
    width = (positive_int("kv_lora_rank", kv_lora_rank)
             + positive_int("qk_rope_head_dim", qk_rope_head_dim))
    return CacheShape(name, "MLA", interleaved_windows(n_layers, None), width, source)


def cache_bytes_per_token_per_layer(shape: CacheShape, *,
                                    bytes_per_value: int = 2) -> int:
    """What one position costs in one layer: width x bytes per value (2: bfloat16)."""
    return shape.width * positive_int("bytes_per_value", bytes_per_value)


def cache_bytes(shape: CacheShape, context: int, *, bytes_per_value: int = 2,
                batch: int = 1) -> int:
    """Bytes of the whole cache for `context` tokens and `batch` rows: every layer
    keeps min(window, context) positions (all `context` for a global layer), each of
    `cache_bytes_per_token_per_layer` bytes. Past the longest window only the global
    layers grow: by global_layers x that per token."""
    context, batch = positive_int("context", context), positive_int("batch", batch)
    kept = sum(context if w is None else min(w, context) for w in shape.windows)
    return batch * kept * cache_bytes_per_token_per_layer(
        shape, bytes_per_value=bytes_per_value)
# --8<-- [end:cache_ledger]


# --8<-- [start:published_attention]
@dataclass(frozen=True)
class PublishedAttention:
    """The attention shape of a published model (numbers only)."""

    name: str
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads: = n_heads for MHA, 1 for MQA
    d_head: int
    source: str  # where the numbers come from


# Each model's config.json on the Hugging Face Hub, cross-checked with its paper.
PUBLISHED_ATTENTION: tuple[PublishedAttention, ...] = (
    PublishedAttention("GPT-2 small", 12, 12, 12, 64,
                       "Radford et al. 2019, table 2 (12 layers, d_model 768); "
                       "openai-community/gpt2 config (n_head 12)"),
    PublishedAttention("Llama-2-7B", 32, 32, 32, 128,
                       "Touvron et al. 2023b (Llama 2; the layer and head counts of "
                       "Llama 1's table 2, Touvron et al. 2023a, which it inherits); "
                       "meta-llama/Llama-2-7b-hf config (hidden 4096, 32 heads)"),
    PublishedAttention("Llama-2-70B", 80, 64, 8, 128,
                       "Touvron et al. 2023b, table 1 and sec. 2.2 (GQA for 34B and "
                       "70B); meta-llama/Llama-2-70b-hf config (hidden 8192, 64 heads, "
                       "8 key/value heads)"),
    PublishedAttention("Falcon-7B", 32, 71, 1, 64,
                       "Almazrouei et al. 2023 (multi-query); tiiuae/falcon-7b config "
                       "(hidden 4544, 71 heads, multi_query: one key/value head)"),
)
# --8<-- [end:published_attention]


# --8<-- [start:gpt2_params]
@dataclass(frozen=True)
class GPT2ParamCount:
    """Parameters of a GPT-2-shaped decoder-only model, term by term (chapter 5)."""

    token_embedding: int  # V d: also the output projection when tied
    positions: int  # C d: one learned vector per position
    per_block: int  # two LayerNorms + attention with biases + FFN with biases
    blocks: int  # n_layers * per_block
    final_norm: int  # 2 d
    head: int  # 0 when tied (Press & Wolf 2017), else another V d

    @property
    def total(self) -> int:
        return (self.token_embedding + self.positions + self.blocks + self.final_norm
                + self.head)


def gpt2_params(vocab_size: int, context: int, d_model: int, n_heads: int,
                n_layers: int, *, d_ff: int | None = None,
                tied: bool = True) -> GPT2ParamCount:
    """Count GPT-2's parameters from its shape. Per block, with d_ff = 4d by default:
    LayerNorms 2 x 2d; attention 4d^2 + 4d (`attention_params` with biases: W_q, W_k,
    W_v, W_o and their biases); FFN 2 d d_ff + d_ff + d (up and down, with biases). So
    12d^2 + 13d per block for d_ff = 4d. GPT-2 small (50257, 1024, 768, 12 heads, 12
    layers): 124,439,808.
    """
    vocab_size = positive_int("vocab_size", vocab_size)
    context = positive_int("context", context)
    d_model = positive_int("d_model", d_model)
    n_layers = positive_int("n_layers", n_layers)
    d_ff = 4 * d_model if d_ff is None else positive_int("d_ff", d_ff)
    if not isinstance(tied, bool):
        raise TypeError(f"tied must be a bool, got {type(tied).__name__}")
    norm = 2 * d_model  # gain and bias
    attention = attention_params(d_model, n_heads, n_heads, bias=True)  # 4 d^2 + 4 d
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model  # up (+ bias), down (+ bias)
    per_block = 2 * norm + attention + ffn
    return GPT2ParamCount(
        token_embedding=vocab_size * d_model,
        positions=context * d_model,
        per_block=per_block,
        blocks=n_layers * per_block,
        final_norm=norm,
        head=0 if tied else vocab_size * d_model,
    )
# --8<-- [end:gpt2_params]


# ---------------------------------------------------------------------------------------
# Chapter 4: the 2017 encoder-decoder

__all__ += ["EncoderDecoderCount", "ParameterFloor", "encoder_decoder_params", "transformer_parameter_floor"]


# --8<-- [start:transformer_parameter_floor]
@dataclass(frozen=True)
class ParameterFloor:
    """The weight matrices of the 2017 sublayers, without biases and LayerNorms."""

    mha_weights: int  # W_q, W_k, W_v, W_o: 4 d^2 whatever the number of heads
    ffn_weights: int  # W_1 [d, d_ff] and W_2 [d_ff, d]: 2 d d_ff
    encoder_layer: int  # self-attention + FFN
    decoder_layer: int  # self-attention + cross-attention + FFN
    ffn_share_encoder: float  # the FFN's share of an encoder layer


def transformer_parameter_floor(d_model: int, d_ff: int) -> ParameterFloor:
    """Bias- and norm-free parameter counts of the 2017 layers (Vaswani et al. 2017,
    sec. 3.2.2 and 3.3). With d_ff = 4d an encoder layer is 12 d^2, two thirds of it
    FFN; a decoder layer adds a second attention: 16 d^2."""
    d_model = positive_int("d_model", d_model)
    d_ff = positive_int("d_ff", d_ff)
    mha = 4 * d_model * d_model
    ffn = 2 * d_model * d_ff
    return ParameterFloor(
        mha_weights=mha,
        ffn_weights=ffn,
        encoder_layer=mha + ffn,
        decoder_layer=2 * mha + ffn,
        ffn_share_encoder=ffn / (mha + ffn),
    )
# --8<-- [end:transformer_parameter_floor]


# --8<-- [start:encoder_decoder_params]
@dataclass(frozen=True)
class EncoderDecoderCount:
    """Every parameter of `EncoderDecoder`, biases and LayerNorms included."""

    embedding: int  # V d, counted once: source, target and output projection share it
    encoder_layer: int  # attention 4d^2 + 4d, FFN 2 d d_ff + d_ff + d, 2 LayerNorms 2d
    decoder_layer: int  # two attentions, the FFN, three LayerNorms
    n_layers: int

    @property
    def total(self) -> int:
        layers = self.encoder_layer + self.decoder_layer
        return self.embedding + self.n_layers * layers


def encoder_decoder_params(vocab_size: int, d_model: int, n_heads: int, d_ff: int,
                           n_layers: int) -> EncoderDecoderCount:
    """Count the encoder-decoder's parameters from its shape. The sinusoidal positions
    are a fixed table, not parameters. The base model of Vaswani et al. 2017 (table 3:
    d 512, 8 heads, d_ff 2048, N 6) with a shared vocabulary of 37,000 tokens (sec. 5.1,
    EN-DE): 63,082,496."""
    vocab_size = positive_int("vocab_size", vocab_size)
    d_model, d_ff = positive_int("d_model", d_model), positive_int("d_ff", d_ff)
    n_layers = positive_int("n_layers", n_layers)
    norm = 2 * d_model  # gain and bias
    attention = attention_params(d_model, n_heads, n_heads, bias=True)  # 4 d^2 + 4 d
    ffn = 2 * d_model * d_ff + d_ff + d_model  # W_1, b_1, W_2, b_2
    return EncoderDecoderCount(
        embedding=vocab_size * d_model,
        encoder_layer=attention + ffn + 2 * norm,
        decoder_layer=2 * attention + ffn + 3 * norm,
        n_layers=n_layers,
    )
# --8<-- [end:encoder_decoder_params]
