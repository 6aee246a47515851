"""What one decoding step reads from memory and what it computes (chapter 8).

A step of a batch of B sequences multiplies each sequence's new token by every weight
of the model: 2 FLOPs (a multiply and an add) per weight per sequence, and to do it it
reads every weight once, whatever B is. Each sequence's query also reads its own keys
and values so far, t of them at position t. So (Pope et al. 2022, sec. 2)

    bytes(B, t) = N b + B t c b,    FLOPs(B, t) = B (2 N + t a)

with N the weights read, b bytes per value, c the cache's values per token,
and a the attention's FLOPs per key read (4 L H d_head: the scores and the weighted sum).
Their ratio, the arithmetic intensity, is about B FLOPs per byte in bfloat16 while the
weights dominate, and tends to H / H_kv (the query heads per key/value head) as the
cache takes over: batching raises the first, grouped-query attention the second.

`decode_step` is that equation; `step_numbers(name)` reads its N, c and a from a
published configuration (`literate.numbers.published`: `parameter_counts`,
`cache_shape`, `published_config`; chapter 3's `kv_cache_bytes_per_token`) and
`published_step` combines them. `cache_passes_weights_at` is the position from
which the cache's bytes pass the weights'. tests/test_decode_traffic.py checks the
counts against independent ones: the parameters of the built model, the `.nbytes` of
real caches, PyTorch's FlopCounterMode on a batched step. The measured side (tokens per
second against B on this CPU) is `literate.tools.decode_batch`'s.

Shapes: B batch, t position (keys each query reads, its own included), L layers, H
query heads, H_kv key/value heads, d_head head width.
"""

from __future__ import annotations

from typing import NamedTuple

from literate.numbers.params import kv_cache_bytes_per_token
from literate.numbers.published import cache_shape, parameter_counts, published_config
from literate.parts.checks import positive_int

__all__ = [
    "DecodeStep",
    "decode_step",
    "step_numbers",
    "published_step",
    "cache_passes_weights_at",
    "TRAFFIC_MODELS",
    "TRAFFIC_BATCHES",
]

# The figure's and the page's two models: one MHA, one GQA of about the same size, and
# the two batches they are drawn at.
TRAFFIC_MODELS = ("Llama 2 7B", "Llama 3 8B")
TRAFFIC_BATCHES = (1, 16)


# --8<-- [start:decode_step]
class DecodeStep(NamedTuple):
    """What one decoding step of a batch reads from memory and computes."""

    weight_bytes: int  # every weight, read once for the whole batch
    cache_bytes: int  # every row's keys and values so far, each row its own
    flops: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte read: the arithmetic intensity."""
        return self.flops / (self.weight_bytes + self.cache_bytes)


def decode_step(*, n_weights: int, kv_per_token: int, attention_per_key: int,
                batch: int, position: int, bytes_per_value: int = 2) -> DecodeStep:
    """One step of `batch` rows whose new tokens sit at `position` (each query reads
    that many keys, its own included): N b + B t c b bytes, B (2 N + t a) FLOPs."""
    n, c = positive_int("n_weights", n_weights), positive_int("kv_per_token",
                                                             kv_per_token)
    a = positive_int("attention_per_key", attention_per_key)
    rows, t = positive_int("batch", batch), positive_int("position", position)
    b = positive_int("bytes_per_value", bytes_per_value)  # the page's b
    weight_bytes = n * b  # read once, however many rows share it
    cache_bytes = rows * t * c * b  # each row reads its own keys and values
    flops = rows * (2 * n + t * a)  # a multiply and an add per weight, per row
    return DecodeStep(weight_bytes, cache_bytes, flops)
# --8<-- [end:decode_step]


# --8<-- [start:step_numbers]
def step_numbers(name: str) -> dict[str, int]:
    """`decode_step`'s model numbers for a dense published model of
    `PUBLISHED_CONFIGS` whose every layer keeps every key (no window, no latent):

    * n_weights: its parameters (`parameter_counts`) less the tables a step only looks
      up (B rows of them): the token embedding unless the head is tied to it (then the
      head multiplies by all of it), and GPT-2's learned positions. Norm gains and
      biases are read too, and counted with 2 FLOPs each like a weight (they are
      under a thousandth of the weights of any model here);
    * kv_per_token: the values one token adds to the cache, 2 L H_kv d_head
      (chapter 3's `kv_cache_bytes_per_token` at one byte per value);
    * attention_per_key: 4 L H d_head FLOPs per key read, the scores (2 H d_head a
      layer) and the weighted sum of the values (as many), `decoding_flops`' count.

    A mixture of experts is refused (which experts a batch reads depends on its
    tokens), as are windowed and latent caches (their bytes are not B t c)."""
    total, active = parameter_counts(name)  # refuses an unknown name
    if total != active:
        raise ValueError(f"name={name!r} is a mixture of experts: a step reads the "
                         f"experts its batch chose, not a fixed N")
    cache = cache_shape(name)
    if cache.kind == "MLA" or cache.global_layers != cache.n_layers:
        raise ValueError(f"name={name!r} has a {cache.kind} cache: its bytes are not "
                         f"B t c")
    c = published_config(name)
    heads = c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or heads  # GPT-2: MHA
    d_head = getattr(c, "head_dim", None) or c.hidden_size // heads
    tables = 0 if c.tie_word_embeddings else c.vocab_size * c.hidden_size
    if c.model_type == "gpt2":  # learned positions: a lookup table too
        tables += c.n_positions * c.n_embd
    layers = c.num_hidden_layers
    return {"n_weights": total - tables,
            "kv_per_token": kv_cache_bytes_per_token(layers, kv_heads, d_head, 1),
            "attention_per_key": 4 * layers * heads * d_head}


def published_step(name: str, *, batch: int, position: int,
                   bytes_per_value: int = 2) -> DecodeStep:
    """`decode_step` of a published model (`step_numbers`), bfloat16 by default."""
    return decode_step(**step_numbers(name), batch=batch, position=position,
                       bytes_per_value=bytes_per_value)


def cache_passes_weights_at(name: str, *, batch: int) -> int:
    """The first position at which a step's cache bytes reach its weight bytes:
    B t c >= N, t = ceil(N / (B c)) (the bytes per value cancel)."""
    numbers = step_numbers(name)
    per_position = positive_int("batch", batch) * numbers["kv_per_token"]
    return -(-numbers["n_weights"] // per_position)
# --8<-- [end:step_numbers]
