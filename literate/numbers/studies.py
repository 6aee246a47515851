"""The measurements behind the chapters' figures and claims, from fixed seeds.

A figure draws what one of these functions measures, and a claim on the page calls the
same function, so the picture and the proof cannot drift apart. Plotting lives in
`literate.figures`; nothing there computes what a claim proves.

* `score_statistics` (chapter 1): why scores are divided by sqrt(d_k).
* `init_study`, `gradient_study` (chapter 5): gradients at initialisation, pre-norm
  against post-norm (Xiong et al. 2020, sec. 3), under two initialisations.
* `sampling_scenario`, `nucleus_example` (chapter 6): one logit vector under four
  decoding policies; the nucleus under two temperatures.
* `qk_norm_study` (chapter 7): attention scores as the query and key weights grow,
  with and without QK-norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.decoding.sampling import next_token_distribution
from literate.parts.attention import causal_allowed
from literate.parts.blocks import PostNormBlock, gpt2_block
from literate.parts.checks import boolean, choice, positive_float, positive_int
from literate.parts.multi_head import MultiHeadAttention, split_heads
from literate.parts.norms import LayerNorm, RMSNorm

__all__ = [
    "score_statistics",
    "NORM_POSITIONS",
    "INITS",
    "STUDY_LAYERS",
    "STUDY_DEPTHS",
    "GPT2_INPUT_STD",
    "InitStudy",
    "init_study",
    "gradient_study",
    "SCENARIO_LOGITS",
    "POLICIES",
    "sampling_scenario",
    "NUCLEUS_LOGITS",
    "NUCLEUS_TOP_P",
    "NUCLEUS_TEMPERATURES",
    "nucleus_example",
    "QK_SCALES",
    "QK_D_MODEL",
    "QK_HEADS",
    "QK_KV_HEADS",
    "QK_BATCH",
    "QK_LENGTH",
    "QK_SEED",
    "QKNormStudy",
    "qk_attention",
    "qk_scores",
    "qk_norm_study",
]


# --8<-- [start:score_statistics]
def score_statistics(d_k: int, samples: int, *, seed: int = 18,
                     keys: int = 16) -> dict[str, float]:
    """Variance of q.k and of q.k/sqrt(d_k) for standard-normal q and k of width d_k,
    and the mean largest softmax weight of a row of `keys` such scores, unscaled and
    scaled. float64, seeded."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(samples, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(samples, d_k, generator=g, dtype=torch.float64)
    dots = (q * k).sum(-1)  # [samples]
    rows = torch.randn(samples // keys, keys, d_k, generator=g, dtype=torch.float64)
    row_q = torch.randn(samples // keys, 1, d_k, generator=g, dtype=torch.float64)
    row_scores = (rows * row_q).sum(-1)  # [rows, keys]: one query against `keys` keys
    return {
        "var_raw": float(dots.var(unbiased=False)),
        "var_scaled": float((dots / math.sqrt(d_k)).var(unbiased=False)),
        "peak_raw": float(row_scores.softmax(-1).amax(-1).mean()),
        "peak_scaled": float((row_scores / math.sqrt(d_k)).softmax(-1).amax(-1).mean()),
    }
# --8<-- [end:score_statistics]


# --8<-- [start:init_study]
NORM_POSITIONS = ("pre", "post")
INITS = ("xavier", "gpt2")
STUDY_LAYERS = 12
STUDY_DEPTHS = (1, 2, 3, 6, 12, 24)
# GPT-2's stream at initialisation: a token's row plus a position's, each N(0, 0.02^2)
GPT2_INPUT_STD = 0.02 * math.sqrt(2)


@dataclass(frozen=True)
class InitStudy:
    """One stack at initialisation, bottom layer first."""

    ffn_grad: list[float]  # ||dL/dW_2||_F of each layer's FFN output weight (down_proj)
    stream_rms: list[float]  # RMS of the residual stream after each layer


def init_study(norm_position: str, n_layers: int, *, init: str = "xavier",
               input_std: float = 1.0, seed: int = 0, d_model: int = 64,
               n_heads: int = 4, batch: int = 8, length: int = 16,
               vocab: int = 64) -> InitStudy:
    """Xiong et al. (2020, sec. 3)'s measurement: `n_layers` GPT-2 blocks at
    initialisation, arranged pre-norm (with GPT-2's final LayerNorm) or post-norm (whose
    output is already normalised), read Gaussian inputs of standard deviation
    `input_std` (1: Xiong et al.'s setting; GPT2_INPUT_STD: the scale at which GPT-2's
    own embeddings start the stream); a fixed random readout and cross-entropy against
    random targets give a loss. Records the gradient norm of every FFN output weight
    and the residual stream's RMS after every layer.

    init="xavier": Xavier-normal matrices (Glorot & Bengio 2010; the variance ~ 1/d of
    Xiong et al.'s analysis); init="gpt2": GPT-2's own, N(0, 0.02^2) with the two
    residual projections of each block at 0.02 / sqrt(2 L). Biases 0, norms gain 1.
    Both arrangements get the same weights for a seed. float32, one thread.
    """
    norm_position = choice("norm_position", norm_position, NORM_POSITIONS)
    init, n_layers = choice("init", init, INITS), positive_int("n_layers", n_layers)
    input_std = positive_float("input_std", input_std)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same reduction order on every machine
    try:
        g = torch.Generator().manual_seed(seed)
        with torch.device("meta"):  # shapes only: every value is set below
            blocks = [gpt2_block(d_model, n_heads, dropout=0.0)
                      for _ in range(n_layers)]
        blocks = [block.to_empty(device="cpu") for block in blocks]
        with torch.no_grad():
            for block in blocks:
                for module in block.modules():
                    if isinstance(module, nn.Linear):
                        w = torch.randn(module.weight.shape, generator=g)
                        residual = module in (block.attn.o_proj, block.ffn.down_proj)
                        xavier = math.sqrt(2.0 / sum(module.weight.shape))
                        gpt2 = 0.02 / math.sqrt(2 * n_layers) if residual else 0.02
                        std = xavier if init == "xavier" else gpt2
                        module.weight.copy_(w * std)
                        module.bias.zero_()
                for norm in (block.attn_norm, block.ffn_norm):
                    norm.weight.fill_(1.0)
                    norm.bias.zero_()
        readout = torch.randn(vocab, d_model, generator=g)
        readout *= math.sqrt(2.0 / (vocab + d_model))  # Xavier: [V, d]
        x = torch.randn(batch, length, d_model, generator=g) * input_std  # [B, T, d]
        targets = torch.randint(0, vocab, (batch, length), generator=g)  # [B, T]
        layers = blocks if norm_position == "pre" else [
            PostNormBlock(b.attn, b.ffn, b.attn_norm, b.ffn_norm)
            for b in blocks]  # the same
        rms = []
        for layer in layers:
            x = layer(x)
            rms.append(float(x.detach().pow(2).mean().sqrt()))
        if norm_position == "pre":
            x = LayerNorm(d_model)(x)  # GPT-2's final norm (Radford et al. 2019)
        logits = x @ readout.T  # [B, T, V]
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        grads = torch.autograd.grad(loss, [b.ffn.down_proj.weight for b in blocks])
    finally:
        torch.set_num_threads(threads)
    return InitStudy(ffn_grad=[float(gr.norm()) for gr in grads], stream_rms=rms)


@lru_cache(maxsize=4)
def gradient_study(init: str = "xavier",
                   input_std: float = 1.0) -> dict[str, dict[int, InitStudy]]:
    """`init_study` for both arrangements at every depth in STUDY_DEPTHS (seed 0),
    cached: chapter 5's claims and its figure read one measurement."""
    return {pos: {depth: init_study(pos, depth, init=init, input_std=input_std)
                  for depth in STUDY_DEPTHS} for pos in NORM_POSITIONS}
# --8<-- [end:init_study]


# --8<-- [start:sampling_scenario]
SCENARIO_LOGITS = (3.0, 2.0, 1.0, 0.0)
POLICIES = {  # name -> keyword arguments of next_token_distribution
    "temperature_1": {},
    "temperature_2": {"temperature": 2.0},
    "top_k_2": {"top_k": 2},
    "top_p_09": {"top_p": 0.9},
}


def sampling_scenario() -> dict[str, list[float]]:
    """Logits [3, 2, 1, 0] under T = 1, T = 2, top-k = 2 and top-p = 0.9, each filter
    on its own, in float64."""
    logits = torch.tensor(SCENARIO_LOGITS, dtype=torch.float64)
    scenario = {"logits": list(SCENARIO_LOGITS)}
    for name, settings in POLICIES.items():
        scenario[name] = next_token_distribution(logits, **settings).tolist()
    return scenario
# --8<-- [end:sampling_scenario]


# --8<-- [start:nucleus_example]
# Ten logits, one strong favourite and a long tail: enough tokens for a nucleus to show.
NUCLEUS_LOGITS = (3.7, 3.0, 2.8, 2.7, 1.7, 1.3, -0.1, -0.4, -0.9, -1.0)
NUCLEUS_TOP_P = 0.9
NUCLEUS_TEMPERATURES = (0.7, 1.5)


def nucleus_example(temperature: float) -> dict[str, list[float] | int]:
    """Sorted probabilities at `temperature`, the cumulative mass, and how many tokens
    top-p = NUCLEUS_TOP_P keeps (the logits are already sorted, largest first)."""
    logits = torch.tensor(NUCLEUS_LOGITS, dtype=torch.float64)
    probs = next_token_distribution(logits, temperature=temperature)
    kept = next_token_distribution(logits, temperature=temperature,
                                   top_p=NUCLEUS_TOP_P) > 0
    return {"probs": probs.tolist(), "cumulative": probs.cumsum(-1).tolist(),
            "kept": int(kept.sum())}
# --8<-- [end:nucleus_example]


# --8<-- [start:qk_norm_study]
QK_SCALES = tuple(2.0**e for e in range(-1, 5))  # s = 1/2, 1, 2, ..., 16
QK_D_MODEL, QK_HEADS, QK_KV_HEADS = 64, 4, 2  # d_head = 16
QK_BATCH, QK_LENGTH, QK_SEED = 4, 32, 0


@dataclass(frozen=True)
class QKNormStudy:
    """The scores of one attention layer at one weight scale."""

    d_head: int
    max_abs_score: float  # largest |q.k| / sqrt(d_head) over the causal pairs
    mean_entropy: float  # of the softmax rows, nats, over batch, heads and rows
    uniform_entropy: float  # the same for uniform rows: the mean of ln(i + 1)


def qk_attention(scale: float, *,
                 qk_norm: bool) -> tuple[MultiHeadAttention, Tensor]:
    """A causal RoPE layer (4 query heads reading 2 key/value heads of width 16) and
    its input, in float64, from seed QK_SEED: both settings get the same weights.

    q_proj, k_proj and v_proj are N(0, 1/d_model), so at scale 1 the entries of q and
    k have variance 1 (chapter 1's setting); q_proj and k_proj are then multiplied by
    `scale`. With qk_norm, RMSNorm(d_head) of unit gain normalises each head's q and k
    before RoPE (Qwen3). x: rows of RMS 1, what a pre-norm block's norm hands over.
    """
    scale, qk_norm = positive_float("scale", scale), boolean("qk_norm", qk_norm)
    d_head = QK_D_MODEL // QK_HEADS
    norms = ({"q_norm": RMSNorm(d_head), "k_norm": RMSNorm(d_head), "qk_norm": "head"}
             if qk_norm else {})
    layer = MultiHeadAttention(QK_D_MODEL, QK_HEADS, QK_KV_HEADS, rope=True,
                               **norms).double()
    g = torch.Generator().manual_seed(QK_SEED)
    with torch.no_grad():
        for proj, s in ((layer.q_proj, scale), (layer.k_proj, scale),
                        (layer.v_proj, 1.0)):
            w = torch.randn(proj.weight.shape, generator=g, dtype=torch.float64)
            proj.weight.copy_(w * s / math.sqrt(QK_D_MODEL))
    x = torch.randn(QK_BATCH, QK_LENGTH, QK_D_MODEL, generator=g, dtype=torch.float64)
    return layer, F.rms_norm(x, (QK_D_MODEL,))  # [B, T, d], every row of RMS 1


def qk_scores(layer: MultiHeadAttention, x: Tensor) -> Tensor:
    """The scores [B, H, T, T] of `layer`'s causal self-attention on x, q.k times the
    layer's scale (-inf where causality blocks), from its own parts in the order its
    forward runs them."""
    q, k = layer.q_proj(x), layer.k_proj(x)  # [B, T, H d_head], [B, T, H_kv d_head]
    if layer.qk_norm == "projection":  # OLMo 2: all heads at once
        q, k = layer.q_norm(q), layer.k_norm(k)
    q = split_heads(q, layer.n_heads)  # [B, H, T, d_head]
    k = split_heads(k, layer.n_kv_heads)  # [B, H_kv, T, d_head]
    if layer.qk_norm == "head":  # Qwen3, Gemma 3: each head on its own
        q, k = layer.q_norm(q), layer.k_norm(k)
    if layer.rope is not None:  # after QK-norm
        q, k = layer.rope(q), layer.rope(k)
    k = k.repeat_interleave(layer.n_heads // layer.n_kv_heads, dim=1)  # [B, H, T, d]
    scale = 1 / math.sqrt(layer.d_head) if layer.scale is None else layer.scale
    scores = q @ k.transpose(-2, -1) * scale  # [B, H, T, T]
    allowed = causal_allowed(x.shape[1], x.shape[1], device=x.device)  # [T, T]
    return scores.masked_fill(~allowed, -math.inf)


def qk_norm_study(scale: float, *, qk_norm: bool) -> QKNormStudy:
    """The largest |score| and the attention rows' mean entropy of `qk_attention`'s
    layer. With QK-norm, |q| = |k| = sqrt(d_head) (less a hair for eps; RoPE turns,
    it does not stretch), so |score| <= sqrt(d_head) at every scale; without it the
    scores grow like scale**2 and the rows collapse onto one key."""
    layer, x = qk_attention(scale, qk_norm=qk_norm)
    with torch.no_grad():
        scores = qk_scores(layer, x)  # [B, H, T, T]
        _, weights = layer(x, causal=True, return_weights=True)  # [B, H, T, T]
    allowed = scores > -math.inf  # [B, H, T, T]: the causal pairs
    keys = allowed[0, 0].sum(-1).double()  # [T]: row i may read i + 1 keys
    return QKNormStudy(
        d_head=layer.d_head,
        max_abs_score=float(scores[allowed].abs().max()),
        mean_entropy=float(torch.special.entr(weights).sum(-1).mean()),  # -w ln w
        uniform_entropy=float(keys.log().mean()),
    )
# --8<-- [end:qk_norm_study]
