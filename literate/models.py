"""A decoder-only language model: GPT-2's layout (Radford et al. 2019), built from this site's parts.

Take the 2017 encoder-decoder, delete the encoder, and every decoder layer loses its
cross-attention: what is left is one stream of tokens read left to right by a stack of
causal pre-norm blocks (`literate.blocks.PreNormBlock`, built by `gpt2_block`). Around the
stack GPT-2 puts

* a token embedding and **learned** absolute positions added to it
  (`literate.positions.LearnedPositions`; Radford et al. 2018, sec. 4.1);
* a final LayerNorm after the last block (Radford et al. 2019, sec. 2.3);
* an output projection that *is* the token embedding, transposed (weight tying, Press &
  Wolf 2017; Hugging Face's `lm_head` is tied to `wte` the same way).

Generation appends one token at a time, re-reading at most `context` tokens (the number of
learned positions): older tokens are cropped. Choosing the token is chapter 6's job
(`literate.sampling`); `next_token_chooser` is the one place this module calls it.

Weights load from Hugging Face's `GPT2LMHeadModel`. Its `Conv1D` layers store the weight as
`[in, out]` (`y = x @ W + b`), the transpose of `nn.Linear`'s `[out, in]`, and `c_attn`
packs the q, k and v projections into one `[d, 3d]` matrix.

Shapes: B batch, T tokens, V vocabulary, d model width, C context (number of positions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.blocks import PreNormBlock, gpt2_block
from literate.checks import non_negative_int, positive_float, positive_int, probability, token_ids
from literate.ffn import DenseFFN, gelu_tanh
from literate.heads import MultiHeadAttention, load_packed_qkv
from literate.norms import LayerNorm
from literate.positions import LearnedPositions
from literate.sampling import checked_top_k, checked_top_p, greedy_step, sample_step

__all__ = [
    "next_token_chooser",
    "GPTLanguageModel",
    "gpt2_model",
    "gpt2_init_",
    "hf_activation",
    "gpt2_from_hf_config",
    "copy_checked",
    "copy_hf_gpt2_block",
    "copy_hf_gpt2",
    "next_token_loss",
    "period_windows",
    "train_period_lm",
]

# --8<-- [start:next_token_chooser]
def next_token_chooser(
    vocab_size: int,
    *,
    do_sample: bool = False,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Callable[[Tensor], Tensor]:
    """A function logits [B, V] -> token ids [B]: greedy, or a draw after temperature,
    top-k and top-p (chapter 6, in that order). Settings are checked here, before any
    token is generated; a sampling setting without `do_sample=True` is an error, not
    silently ignored."""
    if not isinstance(do_sample, bool):
        raise TypeError(f"do_sample must be a bool, got {type(do_sample).__name__}")
    if not do_sample:
        given = [n for n, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p),
                                ("generator", generator)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: used only when sampling; pass do_sample=True")
        return greedy_step
    temperature = 1.0 if temperature is None else positive_float("temperature", temperature)
    top_k = None if top_k is None else checked_top_k(top_k, vocab_size)
    top_p = None if top_p is None else checked_top_p(top_p)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return partial(sample_step, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
# --8<-- [end:next_token_chooser]


# --8<-- [start:gpt_language_model]
class GPTLanguageModel(nn.Module):
    """Decoder-only language model in GPT-2's layout (Radford et al. 2019, sec. 2.3).

    ids [B, T] -> token embedding + learned positions -> dropout -> causal blocks -> final
    norm -> logits [B, T, V], where logits[:, t] scores the token at t + 1. The output
    projection is the token embedding itself (tied: Press & Wolf 2017).
    """

    def __init__(self, token_embedding: nn.Embedding, positions: LearnedPositions,
                 blocks: Sequence[nn.Module], final_norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(token_embedding, nn.Embedding):
            raise TypeError(f"token_embedding must be an nn.Embedding, got {type(token_embedding).__name__}")
        if not isinstance(positions, LearnedPositions):
            raise TypeError(f"positions must be a LearnedPositions, got {type(positions).__name__}")
        if token_embedding.embedding_dim != positions.d_model:
            raise ValueError(f"token embedding and positions must have one width d, got "
                             f"{token_embedding.embedding_dim} and {positions.d_model}")
        dropout = probability("dropout", dropout)
        self.token_embedding = token_embedding  # [V, d], GPT-2's wte
        self.positions = positions  # [C, d], GPT-2's wpe: one trained vector per position
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm  # GPT-2's ln_f, after the last block
        self.lm_head = nn.Linear(token_embedding.embedding_dim, token_embedding.num_embeddings, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # tied: one [V, d] tensor, read twice

    @property
    def vocab_size(self) -> int:
        return self.token_embedding.num_embeddings

    @property
    def context(self) -> int:
        """The longest input: the number of learned positions."""
        return self.positions.max_length

    def check(self, ids: object, *, context: int | None) -> Tensor:
        """`checks.token_ids` with this model's vocabulary, on the model's device."""
        ids = token_ids("ids", ids, vocab_size=self.vocab_size, max_length=context)
        if ids.device != self.token_embedding.weight.device:
            raise ValueError(f"ids is on {ids.device}, the model on {self.token_embedding.weight.device}")
        return ids

    def forward(self, ids: Tensor) -> Tensor:
        ids = self.check(ids, context=self.context)
        x = self.positions(self.token_embedding(ids))  # [B, T, d]: token t + position t
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x)  # causal: position t reads positions 0..t only
        return self.lm_head(self.final_norm(x))  # [B, T, V]

    @torch.no_grad()
    def generate(self, ids: Tensor, max_new_tokens: int, *, eos_id: int | None = None,
                 do_sample: bool = False, temperature: float | None = None, top_k: int | None = None,
                 top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Append up to `max_new_tokens` tokens to every row of `ids` [B, T0]; returns
        [B, T0 + n] with the prompt first. Greedy by default; `do_sample=True` draws with
        the chapter-6 filters. Stops when every row has produced `eos_id` (kept in the
        output; a row that finished repeats it while the others go on) or after
        `max_new_tokens`. Each step reads the last `context` tokens only, so a prompt may
        be longer than the context. Rows share one length: there is no padding here. Runs
        in eval mode (no dropout), restoring the previous mode after.
        """
        ids = self.check(ids, context=None)  # any length: cropped below
        max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
        if eos_id is not None and non_negative_int("eos_id", eos_id) >= self.vocab_size:
            raise ValueError(f"eos_id must be < vocabulary size {self.vocab_size}, got {eos_id}")
        choose = next_token_chooser(self.vocab_size, do_sample=do_sample, temperature=temperature,
                                    top_k=top_k, top_p=top_p, generator=generator)
        finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # [B]
        was_training = self.training
        self.eval()
        try:
            for _ in range(max_new_tokens):
                window = ids[:, -self.context:]  # [B, <= C]: the positions the model has
                next_id = choose(self(window)[:, -1])  # [B]: from the last position's logits
                if eos_id is not None:
                    next_id = next_id.masked_fill(finished, eos_id)  # finished rows repeat EOS
                    finished |= next_id == eos_id
                ids = torch.cat((ids, next_id[:, None]), dim=1)  # [B, T + 1]
                if bool(finished.all()):
                    break
        finally:
            self.train(was_training)
        return ids
# --8<-- [end:gpt_language_model]


# --8<-- [start:gpt2_init]
def gpt2_init_(model: GPTLanguageModel, *, std: float = 0.02) -> GPTLanguageModel:
    """GPT-2's initialisation, in place: every weight matrix and embedding ~ N(0, std^2),
    biases 0 (norms keep gain 1, bias 0). The two projections that write into the residual
    stream (attention's o_proj, the FFN's down_proj) get std / sqrt(N), N = 2 * n_layers
    residual branches, because every branch adds to the same stream (Radford et al. 2019,
    sec. 2.3; std = 0.02 is Hugging Face's initializer_range).
    """
    std = positive_float("std", std)
    residual_std = std / math.sqrt(2 * max(len(model.blocks), 1))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.zero_()
        for block in model.blocks:
            for layer in (getattr(block.attn, "o_proj", None), getattr(block.ffn, "down_proj", None)):
                if layer is not None:
                    layer.weight.normal_(0.0, residual_std)
    return model
# --8<-- [end:gpt2_init]


# --8<-- [start:gpt2_model]
def gpt2_model(vocab_size: int, context: int, d_model: int, n_heads: int, n_layers: int, *,
               d_ff: int | None = None, dropout: float = 0.1, eps: float = 1e-5,
               activation: Callable[[Tensor], Tensor] = gelu_tanh) -> GPTLanguageModel:
    """A GPT-2 of any size, GPT-2-initialised. GPT-2 small is (50257, 1024, 768, 12, 12),
    d_ff = 4 * 768, dropout 0.1: the 12 layers and width 768 of Radford et al. 2019, table 2,
    with the vocabulary, context, heads and dropout of OpenAI's released model (Hugging
    Face's `GPT2Config()` defaults)."""
    vocab_size, context = positive_int("vocab_size", vocab_size), positive_int("context", context)
    n_layers = positive_int("n_layers", n_layers)
    model = GPTLanguageModel(
        nn.Embedding(vocab_size, d_model),
        LearnedPositions(context, d_model),
        [gpt2_block(d_model, n_heads, d_ff=d_ff, dropout=dropout, eps=eps, activation=activation)
         for _ in range(n_layers)],
        LayerNorm(d_model, eps=eps),
        dropout=dropout,
    )
    return gpt2_init_(model)
# --8<-- [end:gpt2_model]


# --8<-- [start:hf_activation]
def hf_activation(name: str) -> Callable[[Tensor], Tensor]:
    """The function behind a Hugging Face `activation_function` name, GELUs only."""
    known = {
        "gelu_new": gelu_tanh,  # GPT-2's own: the tanh form
        "gelu_pytorch_tanh": gelu_tanh,  # the same function, as torch computes it
        "gelu": F.gelu,  # the exact (erf) form
    }
    if name not in known:
        raise ValueError(f"config.activation_function must be one of {sorted(known)}, got {name!r}")
    return known[name]
# --8<-- [end:hf_activation]


# --8<-- [start:gpt2_from_hf_config]
def gpt2_from_hf_config(config: object) -> GPTLanguageModel:
    """Our model with the shape of a Hugging Face `GPT2Config` (weights: `copy_hf_gpt2`).

    Refused rather than silently changed: options this model does not implement
    (attention-weight dropout, cross-attention, per-layer score scaling, the float32
    upcast, untied embeddings) and activations other than GELU.
    """
    if getattr(config, "model_type", None) != "gpt2":
        raise TypeError(f"config must be a transformers GPT2Config, got {type(config).__name__}")
    unsupported = {
        "attn_pdrop": (config.attn_pdrop, 0, "our attention has no dropout on its weights; set it to 0"),
        "add_cross_attention": (config.add_cross_attention, False, "decoder-only: no cross-attention"),
        "scale_attn_weights": (config.scale_attn_weights, True, "scores are always divided by sqrt(d_head)"),
        "scale_attn_by_inverse_layer_idx": (config.scale_attn_by_inverse_layer_idx, False, "not implemented"),
        "reorder_and_upcast_attn": (config.reorder_and_upcast_attn, False, "not implemented"),
        "tie_word_embeddings": (config.tie_word_embeddings, True, "the output projection is always tied"),
    }
    for name, (value, needed, why) in unsupported.items():
        if value != needed:
            raise ValueError(f"config.{name}={value!r} is not supported ({why})")
    activation = hf_activation(config.activation_function)
    d, eps = config.n_embd, config.layer_norm_epsilon
    model = GPTLanguageModel(
        nn.Embedding(config.vocab_size, d),
        LearnedPositions(config.n_positions, d),
        [gpt2_block(d, config.n_head, d_ff=config.n_inner, dropout=config.resid_pdrop, eps=eps,
                    activation=activation)
         for _ in range(config.n_layer)],
        LayerNorm(d, eps=eps),
        dropout=config.embd_pdrop,
    )
    return gpt2_init_(model, std=config.initializer_range)
# --8<-- [end:gpt2_from_hf_config]


# --8<-- [start:copy_hf_gpt2_block]
def copy_checked(name: str, target: Tensor, source: Tensor) -> None:
    """target <- source, refusing a shape mismatch (copy_ would broadcast some silently)."""
    if target.shape != source.shape:
        raise ValueError(f"{name}: ours is {tuple(target.shape)}, theirs {tuple(source.shape)}")
    target.copy_(source)


@torch.no_grad()
def copy_hf_gpt2_block(ours: PreNormBlock, theirs: nn.Module) -> None:
    """Copy a Hugging Face `GPT2Block` into our `PreNormBlock`.

    Conv1D stores W as [in, out] (y = x @ W + b), nn.Linear as [out, in] (y = x @ W.T + b):
    every matrix is transposed. c_attn [d, 3d] packs W_q | W_k | W_v side by side, so its
    transpose [3d, d] is q; k; v stacked by rows, the layout `load_packed_qkv` takes.
    """
    if not isinstance(ours, PreNormBlock) or not isinstance(ours.attn, MultiHeadAttention) \
            or not isinstance(ours.ffn, DenseFFN):
        raise TypeError(f"ours must be a PreNormBlock of MultiHeadAttention and DenseFFN (gpt2_block), "
                        f"got {type(ours).__name__}")
    if type(theirs).__name__ != "GPT2Block":
        raise TypeError(f"theirs must be a transformers GPT2Block, got {type(theirs).__name__}")
    attn, mlp = theirs.attn, theirs.mlp
    load_packed_qkv(ours.attn, attn.c_attn.weight.T, attn.c_attn.bias)  # [3d, d]: q; k; v
    copy_checked("o_proj.weight", ours.attn.o_proj.weight, attn.c_proj.weight.T)  # [d, d]
    copy_checked("o_proj.bias", ours.attn.o_proj.bias, attn.c_proj.bias)
    copy_checked("up_proj.weight", ours.ffn.up_proj.weight, mlp.c_fc.weight.T)  # [d_ff, d]
    copy_checked("up_proj.bias", ours.ffn.up_proj.bias, mlp.c_fc.bias)
    copy_checked("down_proj.weight", ours.ffn.down_proj.weight, mlp.c_proj.weight.T)  # [d, d_ff]
    copy_checked("down_proj.bias", ours.ffn.down_proj.bias, mlp.c_proj.bias)
    for norm, their_norm in ((ours.norm1, theirs.ln_1), (ours.norm2, theirs.ln_2)):
        copy_checked("norm weight", norm.weight, their_norm.weight)
        copy_checked("norm bias", norm.bias, their_norm.bias)
# --8<-- [end:copy_hf_gpt2_block]


# --8<-- [start:copy_hf_gpt2]
@torch.no_grad()
def copy_hf_gpt2(ours: GPTLanguageModel, theirs: nn.Module) -> GPTLanguageModel:
    """Copy a Hugging Face `GPT2LMHeadModel` into our model (same config): wte, wpe, every
    block, ln_f. The head needs nothing: on both sides it is the token embedding."""
    if not isinstance(ours, GPTLanguageModel):
        raise TypeError(f"ours must be a GPTLanguageModel, got {type(ours).__name__}")
    if type(theirs).__name__ != "GPT2LMHeadModel":
        raise TypeError(f"theirs must be a transformers GPT2LMHeadModel, got {type(theirs).__name__}")
    body = theirs.transformer
    if theirs.lm_head.weight is not body.wte.weight:
        raise ValueError("theirs has an untied lm_head; ours is always tied to the token embedding")
    if len(body.h) != len(ours.blocks):
        raise ValueError(f"theirs has {len(body.h)} blocks, ours {len(ours.blocks)}")
    copy_checked("token_embedding", ours.token_embedding.weight, body.wte.weight)
    copy_checked("positions", ours.positions.embedding.weight, body.wpe.weight)
    for block, their_block in zip(ours.blocks, body.h):
        copy_hf_gpt2_block(block, their_block)
    copy_checked("final_norm.weight", ours.final_norm.weight, body.ln_f.weight)
    copy_checked("final_norm.bias", ours.final_norm.bias, body.ln_f.bias)
    return ours
# --8<-- [end:copy_hf_gpt2]


# --8<-- [start:next_token_loss]
def next_token_loss(model: nn.Module, ids: Tensor) -> Tensor:
    """Mean negative log-likelihood, in nats per token, of each next token of `ids` [B, T + 1]:
    the logits at position t are scored against the token at t + 1 (the shift is the whole
    trick of language modelling: no labels beyond the text itself)."""
    logits = model(ids[:, :-1])  # [B, T, V]
    targets = ids[:, 1:]  # [B, T]: each position's next token
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))  # [B * T, V] vs [B * T]
# --8<-- [end:next_token_loss]


# --8<-- [start:period_windows]
def period_windows(period: Sequence[int], repeats: int, context: int) -> Tensor:
    """Training data for the tiny LM: the period repeated `repeats` times, cut into every
    window of context + 1 tokens (context inputs, each with its next token)."""
    stream = torch.tensor(list(period) * positive_int("repeats", repeats), dtype=torch.long)  # [N]
    context = positive_int("context", context)
    if len(stream) <= context:
        raise ValueError(f"the repeated period has {len(stream)} tokens, need more than context={context}")
    return stream.unfold(0, context + 1, 1)  # [N - context, context + 1], as in the source notebook
# --8<-- [end:period_windows]


# --8<-- [start:train_period_lm]
def train_period_lm(settings: Mapping[str, object], *, d_model: int = 24, n_heads: int = 4, d_ff: int = 48,
                    n_layers: int = 1) -> tuple[GPTLanguageModel, list[float]]:
    """Build a tiny GPT-2 from a fixed seed and fit it to a repeated period, full batch,
    with AdamW (no weight decay). Returns the model and the
    loss of every step, measured before that step's update (as in the source notebook).
    `settings` is `reference()["tiny_lm"]`: seed, period, repeats, context, steps, lr."""
    torch.manual_seed(settings["seed"])
    model = gpt2_model(settings["vocab_size"], settings["context"], d_model, n_heads, n_layers,
                       d_ff=d_ff, dropout=0.0)
    windows = period_windows(settings["period"], settings["training_repeats"], settings["context"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"], weight_decay=0.0)
    losses = []
    for _ in range(settings["steps"]):
        loss = next_token_loss(model, windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
# --8<-- [end:train_period_lm]
