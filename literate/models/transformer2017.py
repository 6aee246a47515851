"""The 2017 encoder-decoder, reduced in size (Vaswani et al. 2017, sec. 3 and 5).

* `EncoderDecoder`: N post-norm encoder layers and N post-norm decoder layers (built by
  `blocks.encoder_layer_2017` / `blocks.decoder_layer_2017`, composed, not copied), one
  token embedding shared by the source, the target and the output projection and scaled
  by sqrt(d_model) (sec. 3.4), the fixed sinusoidal positions (sec. 3.5), dropout on the
  sums (sec. 5.4), padding masks derived from the token ids, a label-smoothed loss
  (sec. 5.4) and greedy decoding that stops at EOS.
* `shift_right`: teacher forcing's decoder input; position i reads BOS or target i - 1,
  never target i.
* `transformer_lr`: the learning-rate schedule of sec. 5.3.
* `label_smoothed_nll`: cross-entropy against the smoothed target (sec. 5.4): its
  checks (`smoothing_targets`, one host sync), then `smoothed_nll`, the unchecked
  core that `EncoderDecoder.loss` calls on ids it has already checked.
* `cross_attention_weights`: what each decoder layer's cross-attention reads.
* `smoke`: a seeded forward, backward and Adam step of a tiny model, as JSON evidence
  (`python -m literate.models.transformer2017 --smoke`).

PyTorch's own layers holding our weights, the references the layers are proven equal
to, are in `literate.models.torch_twins`.

Token ids: PAD = 0 (never attended to, never a target), BOS = 1 (starts every decoder
input), EOS = 2 (ends every target) by default. Masks: True = may attend.
Shapes: B batch, S source length, T target length, d model width, V vocabulary, H heads.
"""

# Over 450 lines on purpose: chapter 4's model, its schedule and its loss in six
# sections, in reading order; then the `--smoke` run (`python -m
# literate.models.transformer2017 --smoke`), which prints this model's seeded evidence
# and belongs beside it.

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from literate.parts.blocks import (
    check_decoder_masks,
    decoder_layer_2017,
    encoder_layer_2017,
)
from literate.parts.checks import (
    checked_entry,
    float_tensor,
    ids_in_vocabulary,
    input_checked,
    non_negative_int,
    positive_int,
    probability,
    token_ids,
)
from literate.parts.multi_head import head_counts
from literate.parts.positions import sinusoidal_table

__all__ = [
    "EncoderDecoder",
    "shift_right",
    "transformer_lr",
    "smoothing_targets",
    "smoothed_nll",
    "label_smoothed_nll",
    "cross_attention_weights",
    "smoke",
]


# --8<-- [start:shift_right]
def shift_right(targets: Tensor, bos_id: int) -> Tensor:
    """The decoder input for teacher forcing: [BOS, t_0, ..., t_{T-2}].

    Position i of the decoder predicts target i and reads BOS (i = 0) or target i - 1:
    with the causal mask, nothing it can see holds target i or anything after it
    (Vaswani et al. 2017, sec. 3.1: "the output embeddings are offset by one position").
    The last target is never an input; it is only predicted.
    """
    targets = token_ids("targets", targets)
    bos_id = non_negative_int("bos_id", bos_id)
    bos = torch.full_like(targets[:, :1], bos_id)  # [B, 1]
    return torch.cat((bos, targets[:, :-1]), dim=1)  # [B, T]
# --8<-- [end:shift_right]


# --8<-- [start:transformer_lr]
def transformer_lr(step: int, d_model: int, warmup_steps: int = 4000) -> float:
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
    (Vaswani et al. 2017, sec. 5.3, eq. 3).

    Linear warm-up for `warmup_steps` steps, then decay as 1 / sqrt(step); the two
    branches meet at step = warmup_steps, where the rate peaks at
    (d_model * warmup_steps)^-0.5. Steps count from 1 (step 0 would divide by zero).
    With `torch.optim.lr_scheduler.LambdaLR`, which counts from 0, use lr=1 and
    `lambda s: transformer_lr(s + 1, d_model, warmup_steps)`.
    """
    step = positive_int("step", step)
    d_model = positive_int("d_model", d_model)
    warmup_steps = positive_int("warmup_steps", warmup_steps)
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
# --8<-- [end:transformer_lr]


# --8<-- [start:smoothing_targets]
def smoothing_targets(logits: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
    """The checks of `label_smoothed_nll` on logits [..., V] and targets [...]
    (torch.long): metadata first, then, in one host sync, that every kept target (not
    ignore_index) is a class id in [0, V) and that one is kept. Returns the kept
    positions, targets != ignore_index."""
    logits = float_tensor("logits", logits)
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int, "
                        f"got {type(ignore_index).__name__}")
    if not isinstance(targets, Tensor) or targets.dtype != torch.long:
        kind = targets.dtype if isinstance(targets, Tensor) else type(targets).__name__
        raise TypeError(f"targets must hold class ids as torch.long, got {kind}")
    if (logits.ndim == 0 or targets.shape != logits.shape[:-1]
            or targets.device != logits.device):
        raise ValueError(f"targets must be {tuple(logits.shape[:-1])} on "
                         f"{logits.device} like logits [..., V], got "
                         f"{tuple(targets.shape)} on {targets.device}")
    vocab = logits.shape[-1]
    keep = targets != ignore_index  # [...]
    outside = keep & ((targets < 0) | (targets >= vocab))
    if outside.any() | ~keep.any():  # the one host sync
        if not keep.any():
            raise ValueError(f"targets holds nothing but ignore_index={ignore_index}")
        where = torch.nonzero(outside)[0].tolist()
        raise ValueError(f"targets holds id {int(targets[tuple(where)])} at {where}, "
                         f"outside [0, {vocab}) and not ignore_index={ignore_index}")
    return keep
# --8<-- [end:smoothing_targets]


# --8<-- [start:label_smoothed_nll]
def smoothed_nll(logits: Tensor, targets: Tensor, *, eps: float,
                 ignore_index: int) -> Tensor:
    """`label_smoothed_nll` without its checks: it reads no values (no host sync), so
    its caller must have checked that every target is ignore_index or an id in [0, V)
    and that one is kept (`EncoderDecoder.loss` has: its ids are in the vocabulary and
    no row is only PAD), and that eps is in [0, 1)."""
    keep = targets != ignore_index  # [...]: the positions averaged over
    log_p = torch.log_softmax(logits, dim=-1)  # [..., V]
    safe = torch.where(keep, targets, 0)  # [...]: ignored positions read id 0, dropped
    nll = -log_p.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # [...]: -log p(target)
    uniform = -log_p.mean(dim=-1)  # [...]: cross-entropy against the uniform target
    per_token = (1.0 - eps) * nll + eps * uniform  # [...]
    # The mean over kept positions; where(), not per_token[keep], keeps shapes static.
    return torch.where(keep, per_token, 0.0).sum() / keep.sum()


def label_smoothed_nll(logits: Tensor, targets: Tensor, *, eps: float,
                       ignore_index: int) -> Tensor:
    """Mean cross-entropy between softmax(logits) and the smoothed target
    q = (1 - eps) * one_hot(target) + eps / V, over the positions whose target is not
    `ignore_index` (Szegedy et al. 2016, sec. 7; Vaswani et al. 2017, sec. 5.4: 0.1).

    -sum_k q_k log p_k = (1 - eps) * (-log p_target) + eps * mean_k(-log p_k): the usual
    NLL, plus a pull towards the uniform distribution. logits [..., V], targets [...]:
    class ids in [0, V) or `ignore_index`, which may lie outside the vocabulary
    (PyTorch's default is -100). The checks (one host sync), then `smoothed_nll`.
    """
    eps = probability("eps", eps)
    smoothing_targets(logits, targets, ignore_index)  # the one host sync
    return smoothed_nll(logits, targets, eps=eps, ignore_index=ignore_index)
# --8<-- [end:label_smoothed_nll]


# --8<-- [start:encoder_decoder]
class EncoderDecoder(nn.Module):
    """The 2017 Transformer (Vaswani et al. 2017, sec. 3.1, fig. 1): N post-norm encoder
    layers read the source; N post-norm decoder layers read the shifted target and,
    through cross-attention, the encoder's output. One embedding matrix E [V, d] embeds
    source and target tokens and, transposed, turns the decoder's output into logits
    (sec. 3.4).

    No final LayerNorm after either stack: every post-norm layer already ends with one.
    (`nn.Transformer` adds one after each stack anyway; compare against its stacks,
    `nn.TransformerEncoder` / `nn.TransformerDecoder`, which add none by default.)

    Token ids are checked once, where they enter (`forward`, `loss`, `greedy_decode`):
    one host sync. `run`, the layers and the loss's core read no values; the layers are
    called with empty_row="zero", since checked ids leave no query without a key.
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, d_ff: int,
                 n_layers: int, *, dropout: float, max_length: int, pad_id: int = 0,
                 bos_id: int = 1, eos_id: int = 2) -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        if self.vocab_size < 4:
            raise ValueError(f"vocab_size must be >= 4 (PAD, BOS, EOS and one real "
                             f"token), got {vocab_size}")
        ids = {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id}
        for name, value in ids.items():
            if non_negative_int(name, value) >= self.vocab_size:
                raise ValueError(f"{name}={value} is outside the vocabulary "
                                 f"[0, {self.vocab_size})")
        if len(set(ids.values())) != 3:
            raise ValueError(f"pad_id, bos_id and eos_id must differ, got {ids}")
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.d_model = positive_int("d_model", d_model)
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (each sine of the positions has "
                             f"its cosine), got {d_model}")
        head_counts(self.d_model, n_heads, None)  # before any weight is allocated
        d_ff = positive_int("d_ff", d_ff)
        self.max_length = positive_int("max_length", max_length)
        n_layers = positive_int("n_layers", n_layers)
        dropout = probability("dropout", dropout)

        self.embedding = nn.Embedding(self.vocab_size, self.d_model)  # E, used 3 times
        nn.init.normal_(self.embedding.weight, std=self.d_model**-0.5)  # sqrt(d) E: ~1
        self.dropout = nn.Dropout(dropout)  # on embeddings + positions, sec. 5.4
        self.encoder = nn.ModuleList(
            [encoder_layer_2017(self.d_model, n_heads, d_ff, dropout=dropout)
             for _ in range(n_layers)])
        self.decoder = nn.ModuleList(
            [decoder_layer_2017(self.d_model, n_heads, d_ff, dropout=dropout)
             for _ in range(n_layers)])

    def check(self, **tokens: object) -> list[Tensor]:
        """Ids from outside (name -> [B, T]): metadata, then one host sync for the
        values of all of them (in the vocabulary; no row of nothing but PAD), then one
        batch size for all of them."""
        checked = {name: token_ids(name, t, max_length=self.max_length)
                   for name, t in tokens.items()}
        device = self.embedding.weight.device
        for name, t in checked.items():
            if t.device != device:
                raise ValueError(f"{name} is on {t.device}, the model on {device}")
        ids_in_vocabulary(checked, vocab_size=self.vocab_size, pad_id=self.pad_id)
        batches = {name: t.shape[0] for name, t in checked.items()}
        if len(set(batches.values())) > 1:
            (first, b), *_ = batches.items()
            name = next(n for n, other in batches.items() if other != b)
            raise ValueError(f"{first} has batch {b}, {name} {batches[name]}")
        return list(checked.values())

    def embed(self, tokens: Tensor, *, offset: int = 0) -> Tensor:
        """sqrt(d) * E[tokens] + PE[offset : offset + T], then dropout: [B, T] ->
        [B, T, d]. The sinusoids (sec. 3.5) are a fixed function of the position, not
        parameters; `offset` places tokens that follow `offset` cached ones (chapter 8).
        """
        offset, t = non_negative_int("offset", offset), tokens.shape[1]
        if offset + t > self.max_length:
            raise ValueError(f"offset={offset} + {t} tokens > "
                             f"max_length={self.max_length}")
        x = self.embedding(tokens) * math.sqrt(self.d_model)  # [B, T, d]
        positions = sinusoidal_table(offset + t, self.d_model, dtype=x.dtype,
                                     device=x.device)[offset:]  # [T, d]
        return self.dropout(x + positions)

    def encode(self, x: Tensor, source_valid: Tensor) -> Tensor:
        """Embedded source [B, S, d] -> memory [B, S, d]; source_valid [B, S] hides PAD
        keys."""
        for layer in self.encoder:  # no row is empty: checked ids have no all-PAD row
            x = layer(x, key_valid=source_valid, empty_row="zero")
        return x

    def decode(self, y: Tensor, memory: Tensor, target_valid: Tensor,
               source_valid: Tensor) -> Tensor:
        """Embedded decoder input [B, T, d] -> decoder output [B, T, d]. Each layer is
        causal by construction; cross-attention reads memory [B, S, d] minus its PAD
        keys."""
        if not input_checked():  # called on its own: the masks by their names here
            check_decoder_masks(y, memory, None, {"target_valid": target_valid,
                                                  "source_valid": source_valid})
        for layer in self.decoder:  # key 0 (BOS) is always real, so no row is empty
            y = layer(y, memory, target_valid=target_valid, memory_valid=source_valid,
                      empty_row="zero")
        return y

    def logits(self, hidden: Tensor) -> Tensor:
        """Decoder output [..., d] -> logits [..., V], with the embedding matrix."""
        return hidden @ self.embedding.weight.T  # [..., V]

    def forward(self, source: Tensor, targets: Tensor) -> Tensor:
        """Teacher forcing: logits [B, T, V]; position i predicts targets[:, i]."""
        return self.run(*self.check(source=source, targets=targets))

    def run(self, source: Tensor, targets: Tensor) -> Tensor:
        """`forward` without the checks; the layers it calls do not check either."""
        decoder_input = shift_right(targets, self.bos_id)  # [B, T]
        source_valid = source != self.pad_id  # [B, S]: True = a real token
        with checked_entry(self):  # a weight that does not fit is named
            memory = self.encode(self.embed(source), source_valid)  # [B, S, d]
            hidden = self.decode(self.embed(decoder_input), memory,
                                 decoder_input != self.pad_id,
                                 source_valid)  # [B, T, d]
            return self.logits(hidden)  # [B, T, V]

    def loss(self, source: Tensor, targets: Tensor, *,
             label_smoothing: float = 0.1) -> Tensor:
        """Label-smoothed cross-entropy (sec. 5.4), the mean over non-PAD targets. One
        host sync, the ids' check: checked targets are ids in the vocabulary and no row
        is only PAD, all that `label_smoothed_nll` would check again, so `run` and the
        unchecked `smoothed_nll` follow."""
        eps = probability("label_smoothing", label_smoothing)
        source, targets = self.check(source=source, targets=targets)
        return smoothed_nll(self.run(source, targets), targets, eps=eps,
                            ignore_index=self.pad_id)

    @torch.no_grad()
    def greedy_decode(self, source: Tensor, max_new_tokens: int) -> Tensor:
        """The most likely next token, one at a time: [B, S] -> [B, L], L <=
        max_new_tokens.

        A row stops at its first EOS (kept) and is PAD after it; all rows stop after
        max_new_tokens. PAD and BOS are never produced: they are not targets. There is
        no KV cache, so the decoder reruns on the whole prefix at each step
        (chapter 8's `cached_greedy_decode` keeps the keys and values instead). Runs in
        eval mode (no dropout), restoring the previous mode after.
        """
        (source,) = self.check(source=source)
        max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
        if max_new_tokens > self.max_length:
            raise ValueError(f"max_new_tokens={max_new_tokens} > "
                             f"max_length={self.max_length}")
        was_training = self.training
        self.eval()
        try:
            with checked_entry(self):  # the layers do not check again
                b, device = source.shape[0], source.device
                source_valid = source != self.pad_id  # [B, S]
                memory = self.encode(self.embed(source), source_valid)  # [B, S, d]
                out = torch.full((b, 1), self.bos_id, device=device)  # [B, 1]: BOS
                done = torch.zeros(b, dtype=torch.bool, device=device)  # [B]
                for step in range(max_new_tokens):
                    hidden = self.decode(self.embed(out), memory, out != self.pad_id,
                                         source_valid)  # [B, t, d]
                    logits = self.logits(hidden[:, -1])  # [B, V]: the next token's
                    logits[:, [self.pad_id, self.bos_id]] = -math.inf
                    token = logits.argmax(dim=-1).masked_fill(done, self.pad_id)  # [B]
                    out = torch.cat((out, token[:, None]), dim=1)  # [B, t + 1]
                    done |= token == self.eos_id
                    if step + 1 < max_new_tokens and done.all():  # one sync a token
                        break
        finally:
            self.train(was_training)
        return out[:, 1:]  # [B, L], without the BOS
# --8<-- [end:encoder_decoder]


# --8<-- [start:cross_attention_weights]
def cross_attention_weights(model: EncoderDecoder, source: Tensor,
                            targets: Tensor) -> Tensor:
    """The cross-attention weights of every decoder layer during `model(source,
    targets)`: [n_layers, B, H, T, S]. Forward hooks ask each cross-attention for its
    weights and hand the layer its usual output, so the forward pass is the ordinary
    one."""
    recorded: list[Tensor] = []

    def ask(module, args, kwargs):
        return args, {**kwargs, "return_weights": True}

    def keep(module, args, kwargs, output):
        out, weights = output
        recorded.append(weights.detach())
        return out

    handles = []
    for layer in model.decoder:
        attn = layer.cross_attn
        handles.append(attn.register_forward_pre_hook(ask, with_kwargs=True))
        handles.append(attn.register_forward_hook(keep, with_kwargs=True))
    try:
        with torch.no_grad():
            model(source, targets)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(recorded)  # [n_layers, B, H, T, S]
# --8<-- [end:cross_attention_weights]


# ---------------------------------------------------------------------------------------
# Seeded evidence: `python -m literate.models.transformer2017 --smoke`

SMOKE_SOURCE = [[3, 4, 2, 0, 0], [5, 6, 7, 2, 0]]  # two sentences and EOS, right-padded with PAD
SMOKE_TARGETS = [[4, 3, 2, 0], [7, 6, 5, 2]]  # each source reversed, then EOS


def smoke(seed: int = 7) -> dict[str, Any]:
    """Seeded forward, backward and one Adam step of a tiny model, in float64, dropout
    configured (0.1) but off (eval mode) so that every number is reproducible.

    Returns the evidence as plain JSON-able values: future-target leakage, the effect of
    padded source vectors, the cross-attention probability on PAD keys (all exactly 0),
    the losses, the gradient norm of every parameter, and one optimizer step.
    """
    seed = non_negative_int("seed", seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # float64 sums in one order: the same digits on any machine
    try:
        return _smoke(seed)
    finally:
        torch.set_num_threads(threads)


def _smoke(seed: int) -> dict[str, Any]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = EncoderDecoder(13, 8, 2, 16, 1, dropout=0.1, max_length=16).double().eval()
        source, targets = torch.tensor(SMOKE_SOURCE), torch.tensor(SMOKE_TARGETS)
        source_valid = source != model.pad_id

        with torch.no_grad():
            logits = model(source, targets)  # [B, T, V]
            # 1. Targets at positions >= 1 change: positions 0 and 1 must not notice.
            changed = targets.clone()
            changed[:, 1:] = 12
            future = (model(source, changed)[:, :2] - logits[:, :2]).abs().max()
            # 2. The vectors at PAD positions of the source change, the mask stays.
            x = model.embed(source)
            noisy = x.clone()
            noisy[~source_valid] = torch.randn_like(noisy[~source_valid]) * 10
            decoder_input = shift_right(targets, model.bos_id)
            y = model.embed(decoder_input)
            clean = model.decode(y, model.encode(x, source_valid), decoder_input != 0, source_valid)
            dirty = model.decode(y, model.encode(noisy, source_valid), decoder_input != 0, source_valid)
        padded_effect = (dirty - clean).abs().max()
        # 3. Cross-attention probability on PAD keys.
        weights = cross_attention_weights(model, source, targets)  # [N, B, H, T, S]
        on_pad = weights.masked_select(~source_valid[None, :, None, None, :])

        loss = model.loss(source, targets)  # label smoothing 0.1
        nll = model.loss(source, targets, label_smoothing=0.0)
        loss.backward()
        grads = {name: p.grad for name, p in model.named_parameters()}
        if any(g is None or not torch.isfinite(g).all() for g in grads.values()):
            raise RuntimeError("a gradient is missing or not finite")
        lr = transformer_lr(1, model.d_model)  # step 1 of sec. 5.3 with warmup 4000
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.step()
        update = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
        with torch.no_grad():
            loss_after = model.loss(source, targets)

    return {
        "source_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "seed": seed,
        "dtype": "float64",
        "config": {"vocab_size": 13, "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 1,
                   "pad_id": 0, "bos_id": 1, "eos_id": 2, "norm": "post", "layer_norm_eps": 1e-5},
        "dropout_configured": 0.1,
        "dropout_active": False,
        "parameters": sum(p.numel() for p in model.parameters()),
        "source": SMOKE_SOURCE,
        "targets": SMOKE_TARGETS,
        "decoder_input": shift_right(targets, model.bos_id).tolist(),
        "logits_shape": list(logits.shape),
        "future_target_max_error": float(future),
        "padded_source_max_error": float(padded_effect),
        "masked_cross_probability": float(on_pad.max()),
        "loss_label_smoothed": float(loss.detach()),
        "loss_nll": float(nll.detach()),
        "loss_reduction": "mean over non-PAD target tokens",
        "gradient_norms": {name: float(g.norm()) for name, g in grads.items()},
        "optimizer": {"name": "Adam", "betas": [0.9, 0.98], "eps": 1e-9, "warmup_steps": 4000,
                      "step": 1, "lr": lr},
        "optimizer_steps": 1,
        "update_norm": float(update.norm()),
        "loss_after_step": float(loss_after),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m literate.models.transformer2017", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="print the seeded evidence as JSON")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if not args.smoke:
        parser.error("use --smoke to print the seeded evidence")
    print(json.dumps(smoke(args.seed), indent=2, sort_keys=True, allow_nan=False))


if __name__ == "__main__":
    main()
