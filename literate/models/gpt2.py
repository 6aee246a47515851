"""A decoder-only language model: GPT-2's layout (Radford et al. 2019), from this site's
parts.

Take the 2017 encoder-decoder, delete the encoder, and every decoder layer loses its
cross-attention: what is left is one stream of tokens read left to right by a stack of
causal pre-norm blocks (`literate.parts.blocks.PreNormBlock`, built by `gpt2_block`). Around
the stack GPT-2 puts

* a token embedding and **learned** absolute positions added to it
  (`literate.parts.positions.LearnedPositions`; Radford et al. 2018, sec. 4.1);
* a final LayerNorm after the last block (Radford et al. 2019, sec. 2.3);
* an output projection that *is* the token embedding, transposed (weight tying, Press &
  Wolf 2017; Hugging Face's `lm_head` is tied to `wte` the same way).

Checks at the boundary: `check`, which the model has from `DecoderLanguageModel`
(literate/models/decoder.py), reads the ids' metadata and makes one host sync for their
values; `run` and the layers read no values (under torch.compile the value check is
skipped: check eagerly, compile `run`). Generation appends one token at a time,
re-reading at most `context` tokens (the number of learned positions). The token is
chosen by a function passed in, `choose`: `greedy` by default, or chapter 6's
`literate.decoding.sampling.sampler`. Host syncs of `generate`: one for the prompt's
ids, one per token for the EOS test (none without `eos_id`); choosing adds none.

Weights load from Hugging Face's GPT-2 by name. Its `Conv1D` layers store the weight as
`[in, out]` (`y = x @ W + b`), the transpose of `nn.Linear`'s `[out, in]`, and `c_attn`
packs the q, k and v projections into one `[d, 3d]` matrix.

Shapes: B batch, T tokens, V vocabulary, d model width, C context (number of positions).
"""

# Over 450 lines on purpose: chapter 5's model, its initialisation, its Hugging Face
# configuration and checkpoint loading and its training on the period task: the eleven
# sections the chapter shows, in its order.

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.models.decoder import DecoderLanguageModel
from literate.parts.blocks import PreNormBlock, gpt2_block, same_width
from literate.parts.checks import (
    boolean,
    checked_entry,
    positive_float,
    positive_int,
    probability,
)
from literate.parts.ffn import DenseFFN, gelu_tanh
from literate.parts.norms import LayerNorm
from literate.parts.positions import LearnedPositions

__all__ = [
    "GPTLanguageModel",
    "gpt2_model",
    "gpt2_init_",
    "hf_activation",
    "gpt2_from_hf_config",
    "hf_field",
    "check_gpt2_config",
    "gpt2_block_targets",
    "load_by_name",
    "load_hf_gpt2",
    "copy_hf_gpt2_block",
    "copy_hf_gpt2",
    "next_token_loss",
    "period_windows",
    "train_period_lm",
    "GPT2_DEFAULTS",
]


# --8<-- [start:gpt_language_model]
class GPTLanguageModel(DecoderLanguageModel):
    """Decoder-only language model in GPT-2's layout (Radford et al. 2019, sec. 2.3).

    ids [B, T] -> token embedding + learned positions -> dropout -> causal blocks ->
    final norm -> logits [B, T, V], where logits[:, t] scores the token at t + 1. The
    output projection is the token embedding itself (tied: Press & Wolf 2017).
    Checking, running and generating are `DecoderLanguageModel`'s; GPT-2's own are its
    parts, how it embeds (learned positions added) and its context.
    """

    def __init__(self, token_embedding: nn.Embedding, positions: LearnedPositions,
                 blocks: Sequence[nn.Module], final_norm: nn.Module, *,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(token_embedding, nn.Embedding):
            raise TypeError(f"token_embedding must be an nn.Embedding, "
                            f"got {type(token_embedding).__name__}")
        if not isinstance(positions, LearnedPositions):
            raise TypeError(f"positions must be a LearnedPositions, "
                            f"got {type(positions).__name__}")
        blocks = list(blocks)
        if len(blocks) == 0:
            raise ValueError("blocks must hold at least one block")
        self.d_model = same_width(positions=positions, final_norm=final_norm,
                                  **{f"blocks[{i}]": b for i, b in enumerate(blocks)})
        if token_embedding.embedding_dim != self.d_model:
            raise ValueError(f"token_embedding has width "
                             f"{token_embedding.embedding_dim}, "
                             f"the other parts {self.d_model}")
        self.token_embedding = token_embedding  # [V, d], GPT-2's wte
        self.positions = positions  # [C, d], GPT-2's wpe: a trained vector per position
        self.dropout = nn.Dropout(probability("dropout", dropout))
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm  # GPT-2's ln_f, after the last block
        vocab_size = token_embedding.num_embeddings
        self.lm_head = nn.Linear(self.d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # tied: one [V, d] tensor

    @property
    def context(self) -> int:
        """The longest input: the number of learned positions."""
        return self.positions.max_length

    def embed(self, ids: Tensor, *, offset: int = 0,
              positions: Tensor | None = None) -> Tensor:
        """ids [B, T] -> token embedding + position embedding [B, T, d], the positions
        offset .. offset + T - 1, or each row's own (`positions` [B, T], chapter 8)."""
        x = self.token_embedding(ids)  # [B, T, d]
        return self.dropout(self.positions(x, offset=offset, positions=positions))
# --8<-- [end:gpt_language_model]


# --8<-- [start:gpt2_init]
def gpt2_init_(model: GPTLanguageModel, *, std: float = 0.02) -> GPTLanguageModel:
    """GPT-2's initialisation, in place: every weight matrix and embedding
    ~ N(0, std^2), biases 0 (norms keep gain 1, bias 0). The two projections that write
    into the residual stream (attention's o_proj, the FFN's down_proj) get
    std / sqrt(N), N = 2 * n_layers residual branches, because every branch adds to the
    same stream (Radford et al. 2019, sec. 2.3; std = 0.02 is Hugging Face's
    initializer_range).
    """
    if not isinstance(model, GPTLanguageModel):
        raise TypeError(f"model must be a GPTLanguageModel (gpt2_model), "
                        f"got {type(model).__name__}")
    std = positive_float("std", std)
    residual_std = std / math.sqrt(2 * max(len(model.blocks), 1))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.zero_()
        for block in model.blocks:
            for layer in (getattr(block.attn, "o_proj", None),
                          getattr(block.ffn, "down_proj", None)):
                if layer is not None:
                    layer.weight.normal_(0.0, residual_std)
    return model
# --8<-- [end:gpt2_init]


# --8<-- [start:gpt2_model]
def gpt2_model(vocab_size: int, context: int, d_model: int, n_heads: int, n_layers: int,
               *, d_ff: int | None = None, dropout: float = 0.1, eps: float = 1e-5,
               activation: Callable[[Tensor], Tensor] = gelu_tanh) -> GPTLanguageModel:
    """A GPT-2 of any size, GPT-2-initialised. GPT-2 small is
    (50257, 1024, 768, 12, 12), d_ff = 4 * 768, dropout 0.1: the 12 layers and width
    768 of Radford et al. 2019, table 2, with the vocabulary, context, heads and
    dropout of OpenAI's released model (Hugging Face's `GPT2Config()` defaults)."""
    vocab_size = positive_int("vocab_size", vocab_size)
    context, n_layers = positive_int("context", context), positive_int("n_layers",
                                                                       n_layers)
    block = partial(gpt2_block, d_model, n_heads, d_ff=d_ff, dropout=dropout, eps=eps,
                    activation=activation)
    blocks = [block()]  # gpt2_block checks a block's arguments
    with checked_entry():  # the other layers and the model's parts trust them
        blocks += [block() for _ in range(n_layers - 1)]
        model = GPTLanguageModel(
            nn.Embedding(vocab_size, d_model),
            LearnedPositions(context, d_model),
            blocks,
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
    if not isinstance(name, str):
        raise TypeError(f"activation_function must be a str, one of {sorted(known)}, "
                        f"got {type(name).__name__}")
    if name not in known:
        raise ValueError(f"activation_function must be one of {sorted(known)}, "
                         f"got {name!r}")
    return known[name]
# --8<-- [end:hf_activation]


# --8<-- [start:gpt2_from_hf_config]
# transformers' GPT2Config defaults, for what a checkpoint's config.json leaves out
GPT2_DEFAULTS = {
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
    "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
    "initializer_range": 0.02, "add_cross_attention": False, "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
    "tie_word_embeddings": True,
}


def hf_field(config: object, name: str) -> object:
    """`config.name` of a transformers config, or `config[name]` of its config.json
    (a dict, with GPT-2's defaults for what it leaves out). Anything else (a model
    id, None) is refused, and so is a flag that is not a bool ("false" is true)."""
    if isinstance(config, Mapping):
        if name not in config and name not in GPT2_DEFAULTS:
            raise ValueError(f"config has no {name!r}")
        value = config.get(name, GPT2_DEFAULTS.get(name))
    elif any(c.__name__.lower() == "pretrainedconfig" for c in type(config).__mro__):
        if not hasattr(config, name):
            raise ValueError(f"config {type(config).__name__} has no {name!r}")
        value = getattr(config, name)
    else:
        given = (f"the string {config!r}; load it with AutoConfig.from_pretrained "
                 "first" if isinstance(config, str) else type(config).__name__)
        raise TypeError(f"config must be a transformers configuration or the dict of "
                        f"a config.json, got {given}")
    if isinstance(GPT2_DEFAULTS.get(name), bool) and not isinstance(value, bool):
        raise TypeError(f"config {name} must be a bool, got {value!r}")
    if name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner") \
            and value is not None:
        positive_int(name, value)
    return value


def gpt2_from_hf_config(config: object, *, inference: bool = False) -> GPTLanguageModel:
    """Our model in the shape of a Hugging Face GPT-2 configuration: a `GPT2Config`, or
    the dict of a checkpoint's config.json. Weights: `load_hf_gpt2` / `copy_hf_gpt2`.

    Refused rather than silently changed: what this model does not implement (dropout
    on the attention weights, cross-attention, other score scalings, untied embeddings)
    and activations other than GELU. Every published GPT-2 sets attn_pdrop = 0.1, which
    acts only in training: `inference=True` accepts it and returns the model in eval
    mode, where no dropout runs; training such a model would drop less than GPT-2 did.
    """
    if hf_field(config, "model_type") != "gpt2":
        raise TypeError(f"config must describe a GPT-2 (model_type 'gpt2'), got "
                        f"{hf_field(config, 'model_type')!r}")
    unsupported = {  # field: (the value we implement, why)
        "attn_pdrop": (0, "no dropout on the attention weights; for inference pass "
                          "inference=True: dropout is off there"),
        "add_cross_attention": (False, "decoder-only: no cross-attention"),
        "scale_attn_weights": (True, "scores are always divided by sqrt(d_head)"),
        "scale_attn_by_inverse_layer_idx": (False, "not implemented"),
        "reorder_and_upcast_attn": (False, "not implemented"),
        "tie_word_embeddings": (True, "the output projection is always tied"),
    }
    if boolean("inference", inference):
        del unsupported["attn_pdrop"]  # dropout is off in eval mode
    for name, (needed, why) in unsupported.items():
        if hf_field(config, name) != needed:
            raise ValueError(f"config {name}={hf_field(config, name)!r} is not "
                             f"supported: {why}")
    activation = hf_activation(hf_field(config, "activation_function"))
    d, eps = hf_field(config, "n_embd"), hf_field(config, "layer_norm_epsilon")
    d_ff = hf_field(config, "n_inner")
    n_layers = positive_int("n_layer", hf_field(config, "n_layer"))
    model = GPTLanguageModel(
        nn.Embedding(positive_int("vocab_size", hf_field(config, "vocab_size")),
                     positive_int("n_embd", d)),
        LearnedPositions(hf_field(config, "n_positions"), d),
        [gpt2_block(d, hf_field(config, "n_head"), d_ff=d_ff, eps=eps,
                    activation=activation, dropout=hf_field(config, "resid_pdrop"))
         for _ in range(n_layers)],
        LayerNorm(d, eps=eps),
        dropout=hf_field(config, "embd_pdrop"),
    )
    model = gpt2_init_(model, std=hf_field(config, "initializer_range"))
    return model.eval() if inference else model
# --8<-- [end:gpt2_from_hf_config]


# --8<-- [start:check_gpt2_config]
def check_gpt2_config(ours: GPTLanguageModel | PreNormBlock, config: object) -> None:
    """Refuse to copy weights between models (or blocks) of different shape or
    function, naming both sides: vocabulary, positions, layers, width, heads, FFN
    width, eps and activation."""
    model = ours if isinstance(ours, GPTLanguageModel) else None
    block = ours.blocks[0] if model is not None else ours
    if not isinstance(block, PreNormBlock) or not isinstance(block.ffn, DenseFFN):
        raise TypeError(f"ours must be a GPTLanguageModel or a gpt2_block, "
                        f"got {type(ours).__name__}")
    d = hf_field(config, "n_embd")
    pairs = [  # (our name, our value, their field, their value)
        ("d_model", block.d_model, "n_embd", d),
        ("n_heads", block.attn.n_heads, "n_head", hf_field(config, "n_head")),
        ("d_ff", block.ffn.d_ff, "n_inner", hf_field(config, "n_inner") or 4 * d),
        ("eps", block.attn_norm.eps, "layer_norm_epsilon",
         hf_field(config, "layer_norm_epsilon")),
        ("activation", block.ffn.activation, "activation_function",
         hf_activation(hf_field(config, "activation_function"))),
    ]
    if model is not None:
        pairs += [
            ("vocab_size", model.vocab_size, "vocab_size",
             hf_field(config, "vocab_size")),
            ("context", model.context, "n_positions", hf_field(config, "n_positions")),
            ("n_layers", len(model.blocks), "n_layer", hf_field(config, "n_layer")),
        ]
    for name, mine, field, theirs in pairs:
        if mine != theirs:
            raise ValueError(f"ours has {name}={mine!r}, theirs {field}={theirs!r}")
# --8<-- [end:check_gpt2_config]


# --8<-- [start:load_hf_gpt2]
def gpt2_block_targets(block: PreNormBlock,
                       prefix: str = "") -> dict[str, tuple[list[Tensor], bool]]:
    """Hugging Face GPT2Block weight name -> (the tensors of ours it fills, stacked by
    rows; whether it is a Conv1D matrix). Conv1D stores W as [in, out] (y = x @ W + b),
    nn.Linear as [out, in]: those are transposed. c_attn [d, 3d] is W_q | W_k | W_v
    side by side, so its transpose [3d, d] is q; k; v by rows."""
    a, f, n1, n2 = block.attn, block.ffn, block.attn_norm, block.ffn_norm
    return {prefix + name: targets for name, targets in {
        "ln_1.weight": ([n1.weight], False), "ln_1.bias": ([n1.bias], False),
        "attn.c_attn.weight": ([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight],
                               True),
        "attn.c_attn.bias": ([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias], False),
        "attn.c_proj.weight": ([a.o_proj.weight], True),
        "attn.c_proj.bias": ([a.o_proj.bias], False),
        "ln_2.weight": ([n2.weight], False), "ln_2.bias": ([n2.bias], False),
        "mlp.c_fc.weight": ([f.up_proj.weight], True),
        "mlp.c_fc.bias": ([f.up_proj.bias], False),
        "mlp.c_proj.weight": ([f.down_proj.weight], True),
        "mlp.c_proj.bias": ([f.down_proj.bias], False),
    }.items()}


@torch.no_grad()
def load_by_name(targets: Mapping[str, tuple[list[Tensor], bool]],
                 state_dict: Mapping[str, Tensor]) -> None:
    """Fill every target from `state_dict`, all or nothing: a missing, misshapen or
    unused weight is refused before anything is copied (old checkpoints' causal-mask
    buffers, `attn.bias`, are not weights)."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a Mapping of names to tensors (a model's "
                        f"state_dict()), got {type(state_dict).__name__}")
    for key, value in state_dict.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"state_dict[{key!r}] must be a tensor, "
                            f"got {type(value).__name__}")
    missing = [key for key in targets if key not in state_dict]
    unused = [k for k in state_dict if k not in targets
              and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if missing:
        raise ValueError(f"state_dict has no {missing[0]!r}")
    if unused:
        raise ValueError(f"state_dict has weights ours has no place for: {unused[:6]}")
    for key, (parts, conv1d) in targets.items():
        weight = state_dict[key]
        if not weight.is_floating_point() or weight.is_meta and not parts[0].is_meta:
            raise TypeError(f"state_dict[{key!r}] must be a floating-point tensor with "
                            f"values, got {weight.dtype} on {weight.device}")
        sizes = [p.shape[0] for p in parts]
        needed = (sum(sizes), *parts[0].shape[1:])  # [out, in], like nn.Linear
        if (state_dict[key].T if conv1d else state_dict[key]).shape != needed:
            raise ValueError(f"{key} is {tuple(state_dict[key].shape)}, ours needs "
                             + (f"{needed[::-1]}: a Conv1D matrix is [in, out]"
                                if conv1d else f"{needed}"))
    for key, (parts, conv1d) in targets.items():
        source = state_dict[key].T if conv1d else state_dict[key]
        for part, piece in zip(parts, source.split([p.shape[0] for p in parts])):
            part.copy_(piece)


def load_hf_gpt2(ours: GPTLanguageModel, state_dict: Mapping[str, Tensor],
                 config: object) -> GPTLanguageModel:
    """Load Hugging Face GPT-2 weights by name: a `GPT2LMHeadModel`'s or `GPT2Model`'s
    state dict, or `safetensors.torch.load_file` of a checkpoint, with the configuration
    they were made with (a `GPT2Config` or the checkpoint's config.json as a dict): the
    shapes alone would let 8 heads load 4 heads' weights, or another eps, silently. The
    output head is the token embedding on both sides (a stored `lm_head.weight` must
    equal `wte`). A checkpoint, from its two files:

        config = json.load(open("config.json"))
        model = gpt2_from_hf_config(config, inference=True)
        load_hf_gpt2(model, safetensors.torch.load_file("model.safetensors"), config)
    """
    if not isinstance(ours, GPTLanguageModel):
        raise TypeError(f"ours must be a GPTLanguageModel, got {type(ours).__name__}")
    check_gpt2_config(ours, config)
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a Mapping of names to tensors (a model's "
                        f"state_dict()), got {type(state_dict).__name__}")
    theirs = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    head = theirs.pop("lm_head.weight", None)
    if head is not None and not isinstance(head, Tensor):
        raise TypeError(f"state_dict['lm_head.weight'] must be a tensor, "
                        f"got {type(head).__name__}")
    targets = {"wte.weight": ([ours.token_embedding.weight], False),
               "wpe.weight": ([ours.positions.embedding.weight], False),
               "ln_f.weight": ([ours.final_norm.weight], False),
               "ln_f.bias": ([ours.final_norm.bias], False)}
    for i, block in enumerate(ours.blocks):
        targets |= gpt2_block_targets(block, f"h.{i}.")
    wte = theirs.get("wte.weight", head)
    if head is not None and isinstance(wte, Tensor) and not torch.equal(head, wte):
        raise ValueError("lm_head.weight differs from wte.weight: ours is always tied")
    load_by_name(targets, theirs)
    return ours
# --8<-- [end:load_hf_gpt2]


# --8<-- [start:copy_hf_gpt2]
def copy_hf_gpt2(ours: GPTLanguageModel, theirs: nn.Module) -> GPTLanguageModel:
    """Copy a transformers `GPT2LMHeadModel` into our model, configurations checked."""
    if type(theirs).__name__ != "GPT2LMHeadModel":
        raise TypeError(f"theirs must be a transformers GPT2LMHeadModel, "
                        f"got {type(theirs).__name__}")
    return load_hf_gpt2(ours, theirs.state_dict(), theirs.config)


def copy_hf_gpt2_block(ours: PreNormBlock, theirs: nn.Module) -> PreNormBlock:
    """Copy one transformers `GPT2Block` into our `gpt2_block`, configurations
    checked."""
    if type(theirs).__name__ != "GPT2Block":
        raise TypeError(f"theirs must be a transformers GPT2Block, "
                        f"got {type(theirs).__name__}")
    check_gpt2_config(ours, theirs.attn.config)
    load_by_name(gpt2_block_targets(ours), theirs.state_dict())
    return ours
# --8<-- [end:copy_hf_gpt2]


# --8<-- [start:next_token_loss]
def next_token_loss(model: DecoderLanguageModel, ids: Tensor) -> Tensor:
    """Mean negative log-likelihood, in nats per token, of each next token of `ids`
    [B, T + 1]: the logits at position t are scored against the token at t + 1 (the
    shift is the whole trick of language modelling: no labels beyond the text itself).
    Every id is checked, the targets in the last column too."""
    if not isinstance(model, DecoderLanguageModel):
        raise TypeError(f"model must be a DecoderLanguageModel, "
                        f"got {type(model).__name__}")
    ids = model.check(ids, max_length=model.context + 1)
    if ids.shape[1] < 2:
        raise ValueError(f"ids must have T + 1 >= 2 tokens (inputs and their next), "
                         f"got {tuple(ids.shape)}")
    logits = model.run(ids[:, :-1])  # [B, T, V]
    targets = ids[:, 1:]  # [B, T]: each position's next token
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # [B*T, V], [B*T]
# --8<-- [end:next_token_loss]


# --8<-- [start:period_windows]
def period_windows(period: Sequence[int], repeats: int, context: int) -> Tensor:
    """Training data for the tiny LM: the period repeated `repeats` times, cut into
    every window of context + 1 tokens (context inputs, each with its next token)."""
    repeats = positive_int("repeats", repeats)
    stream = torch.tensor(list(period) * repeats)  # [N]
    if len(stream) and stream.dtype != torch.long:  # ids are never cast: 2.7 is a bug
        raise TypeError(f"period must hold int token ids, got {stream.dtype}")
    context = positive_int("context", context)
    if len(stream) <= context:
        raise ValueError(f"the repeated period has {len(stream)} tokens, "
                         f"need more than context={context}")
    return stream.unfold(0, context + 1, 1)  # [N - context, context + 1]
# --8<-- [end:period_windows]


# --8<-- [start:train_period_lm]
def train_period_lm(settings: Mapping[str, object], *, d_model: int = 24,
                    n_heads: int = 4, d_ff: int = 48,
                    n_layers: int = 1) -> tuple[GPTLanguageModel, list[float]]:
    """Build a tiny GPT-2 from a fixed seed and fit it to a repeated period, full batch,
    with AdamW (no weight decay). Returns the model and the loss of every step,
    measured before that step's update. `settings` holds seed, vocab_size, period,
    training_repeats, context, steps and learning_rate."""
    keys = ("seed", "vocab_size", "period", "training_repeats", "context", "steps",
            "learning_rate")
    if not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a dict of {list(keys)}, "
                        f"got {type(settings).__name__}")
    if any(key not in settings for key in keys):
        raise ValueError(f"settings has no {[k for k in keys if k not in settings]}")
    torch.manual_seed(settings["seed"])
    model = gpt2_model(settings["vocab_size"], settings["context"], d_model, n_heads,
                       n_layers, d_ff=d_ff, dropout=0.0)
    windows = period_windows(settings["period"], settings["training_repeats"],
                             settings["context"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"],
                                  weight_decay=0.0)
    losses = []
    for _ in range(settings["steps"]):
        loss = next_token_loss(model, windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
# --8<-- [end:train_period_lm]
