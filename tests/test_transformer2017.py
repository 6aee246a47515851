"""The reduced 2017 encoder-decoder: equal to a model assembled from PyTorch's own
nn.TransformerEncoder / nn.TransformerDecoder, forward and backward; shifted targets;
padding from token ids; greedy decoding; the schedule and the loss of sec. 5; parameter
counts; every error path; the host syncs of a forward, a loss (one: the ids' check, not
a second one of the targets) and greedy decoding (ids are checked once, where they come
in); the `--smoke` evidence.

Tolerance: 1e-12 absolute in float64 (see tests/test_blocks_2017.py for why).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import literate.models.transformer2017 as seq2seq
from literate.models.torch_twins import (
    TORCH_DECODER_NORMS,
    TORCH_ENCODER_NORMS,
    torch_decoder_layer,
    torch_encoder_layer,
)
from literate.models.transformer2017 import (
    EncoderDecoder,
    cross_attention_weights,
    label_smoothed_nll,
    shift_right,
    smoke,
    smoothed_nll,
    transformer_lr,
)
from literate.numbers.golden import reference
from literate.numbers.params import encoder_decoder_params, transformer_parameter_floor
from literate.parts.positions import sinusoidal_table
from literate.tools.syncs import HostReads as HostSyncs

from harness import BAD_SOURCE_IDS

ROOT = Path(__file__).resolve().parents[1]
TOL = {"atol": 1e-12, "rtol": 0.0}
PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(scope="module", autouse=True)
def smoke_process(request):
    """`python -m literate.models.transformer2017 --smoke`, started as soon as this module's tests start, so
    that its interpreter and torch start-up (~2 s) overlap with the tests before it.

    smoke() sets one intra-op thread itself (float64 sums reduced in one order), so the
    subprocess and this process print the same digits whatever their thread counts: the
    JSON is compared exactly."""
    wanted = any(
        item.name == "test_smoke_entry_point_prints_the_same_json"
        for item in request.session.items
    )
    process = None
    if wanted:
        env = dict(os.environ)  # smoke() runs on one thread whatever the machine has
        process = subprocess.Popen(
            [sys.executable, "-m", "literate.models.transformer2017", "--smoke"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    yield process
    if process is not None and process.poll() is None:
        process.kill()
        process.communicate()


def count_syncs(call):
    """(what `call()` returned, how many host syncs it made)."""
    with HostSyncs() as syncs:
        result = call()
    return result, len(syncs.calls)


def gen(seed: int) -> torch.Generator:
    """Every random tensor in this file comes from a seeded generator."""
    return torch.Generator().manual_seed(seed)


def tiny(seed=0, **overrides) -> EncoderDecoder:
    torch.manual_seed(seed)
    config = {"dropout": 0.0, "max_length": 12} | overrides
    return EncoderDecoder(11, 16, 4, 32, 2, **config).double().eval()


SOURCE = torch.tensor([[3, 4, 5, 2, 0, 0], [6, 7, 8, 9, 10, 2], [3, 2, 0, 0, 0, 0]])
TARGETS = torch.tensor([[5, 4, 3, 2, 0], [10, 9, 8, 7, 6], [3, 2, 0, 0, 0]])


# ---------------------------------------------------------------------------------------
# The whole model against PyTorch's stacks


def reference_logits(model: EncoderDecoder, source, targets):
    """The same model assembled from nn.TransformerEncoder / nn.TransformerDecoder and the
    paper's formulas, written independently of literate/."""
    n = len(model.encoder)
    enc = nn.TransformerEncoder(
        torch_encoder_layer(model.encoder[0]), n, enable_nested_tensor=False
    )
    dec = nn.TransformerDecoder(torch_decoder_layer(model.decoder[0]), n)
    for i in range(1, n):
        enc.layers[i].load_state_dict(
            torch_encoder_layer(model.encoder[i]).state_dict()
        )
        dec.layers[i].load_state_dict(
            torch_decoder_layer(model.decoder[i]).state_dict()
        )
    E, d = model.embedding.weight, model.d_model

    def embed(tokens):
        pos = torch.arange(tokens.shape[1], dtype=torch.float64)[:, None]
        angle = pos / 10_000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        pe = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(
            1
        )  # sin, cos interleaved
        return F.embedding(tokens, E) * math.sqrt(d) + pe

    dec_in = torch.cat((torch.full_like(targets[:, :1], BOS), targets[:, :-1]), dim=1)
    memory = enc(embed(source), src_key_padding_mask=source == PAD)
    causal = torch.ones(targets.shape[1], targets.shape[1], dtype=torch.bool).triu(
        1
    )  # True = blocked
    h = dec(
        embed(dec_in),
        memory,
        tgt_mask=causal,
        tgt_is_causal=True,
        tgt_key_padding_mask=dec_in == PAD,
        memory_key_padding_mask=source == PAD,
    )
    return h @ E.T, enc, dec


def ours_in_torch_layout(
    model: EncoderDecoder, grads: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Our gradients, renamed and packed the way `reference_logits`' stacks hold them
    ("enc." / "dec." + nn.TransformerEncoder / nn.TransformerDecoder names). Every one of
    our parameters must be used exactly once: an unmapped one is an error."""
    unused = dict(grads)

    def take(name: str) -> torch.Tensor:
        return unused.pop(name)

    out = {"embedding.weight": take("embedding.weight")}
    for stack, prefix in (("encoder", "enc"), ("decoder", "dec")):
        for i in range(len(getattr(model, stack))):
            ours, theirs = f"{stack}.{i}", f"{prefix}.layers.{i}"
            attns = [("self_attn", "self_attn")] + (
                [("cross_attn", "multihead_attn")] if stack == "decoder" else []
            )
            for attn, t_name in attns:
                for kind in (
                    "weight",
                    "bias",
                ):  # q; k; v stacked by rows, as in_proj holds them
                    out[f"{theirs}.{t_name}.in_proj_{kind}"] = torch.cat(
                        [take(f"{ours}.{attn}.{p}_proj.{kind}") for p in "qkv"]
                    )
                    out[f"{theirs}.{t_name}.out_proj.{kind}"] = take(
                        f"{ours}.{attn}.o_proj.{kind}"
                    )
            for kind in ("weight", "bias"):
                out[f"{theirs}.linear1.{kind}"] = take(f"{ours}.ffn.up_proj.{kind}")
                out[f"{theirs}.linear2.{kind}"] = take(f"{ours}.ffn.down_proj.{kind}")
                norms = (
                    TORCH_DECODER_NORMS if stack == "decoder" else TORCH_ENCODER_NORMS
                )
                for mine, its in norms.items():
                    out[f"{theirs}.{its}.{kind}"] = take(f"{ours}.{mine}.{kind}")
    assert not unused, f"our parameters with no counterpart: {sorted(unused)}"
    return out


def assert_same_gradients(
    ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]
) -> None:
    """The same set of names, and every gradient equal within TOL."""
    assert set(ours) == set(theirs), (
        f"unmapped parameters: {sorted(set(ours) ^ set(theirs))}"
    )
    for name, g in theirs.items():
        torch.testing.assert_close(ours[name], g, **TOL, msg=lambda m: f"{name}: {m}")


def test_model_equals_pytorch_stacks_forward_and_backward():
    model = tiny()
    g = gen(1)
    with (
        torch.no_grad()
    ):  # every parameter random, gains and biases included: none is an identity or 0
        for name, p in model.named_parameters():
            if name != "embedding.weight":
                gain = 1.0 if "norm" in name and name.endswith("weight") else 0.0
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 + gain)
    ours = model(SOURCE, TARGETS)
    theirs, enc, dec = reference_logits(model, SOURCE, TARGETS)
    torch.testing.assert_close(ours, theirs, **TOL)
    probe = torch.randn(ours.shape, generator=gen(2), dtype=ours.dtype)
    names = [n for n, _ in model.named_parameters()]
    grads = dict(
        zip(names, torch.autograd.grad((ours * probe).sum(), list(model.parameters())))
    )
    their_names = (
        ["embedding.weight"]
        + [f"enc.{n}" for n, _ in enc.named_parameters()]
        + [f"dec.{n}" for n, _ in dec.named_parameters()]
    )
    their_params = [model.embedding.weight, *enc.parameters(), *dec.parameters()]
    their_grads = dict(
        zip(their_names, torch.autograd.grad((theirs * probe).sum(), their_params))
    )
    assert (
        len(their_grads) == 1 + 2 * 12 + 2 * 18
    )  # embedding; 12 tensors per encoder layer, 18 per decoder layer
    assert_same_gradients(ours_in_torch_layout(model, grads), their_grads)


# ---------------------------------------------------------------------------------------
# Shifted targets, padding, embeddings


def test_shift_right_puts_bos_first_and_drops_the_last_target():
    targets = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    assert shift_right(targets, BOS).tolist() == [[1, 5, 6, 7], [1, 8, 2, 0]]
    shifted = shift_right(TARGETS, BOS)
    assert torch.equal(shifted[:, 1:], TARGETS[:, :-1])  # position i reads target i - 1
    with pytest.raises(
        TypeError,
        match=r"^targets must hold token ids as torch\.long, got torch\.float32$",
    ):
        shift_right(targets.float(), BOS)
    with pytest.raises(
        TypeError, match=r"^targets must hold token ids as torch\.long, got list$"
    ):
        shift_right(targets.tolist(), BOS)
    with pytest.raises(
        ValueError, match=r"^targets must have shape \[B, T\], B, T >= 1, got \(4,\)$"
    ):  # no repr
        shift_right(targets[0], BOS)
    with pytest.raises(ValueError, match=r"^bos_id must be >= 0, got -1$"):
        shift_right(targets, -1)
    with pytest.raises(TypeError, match=r"^bos_id must be an int, got float$"):
        shift_right(targets, 1.0)
    _, syncs = count_syncs(lambda: shift_right(targets, BOS))
    assert syncs == 0  # metadata only


def test_no_position_sees_its_own_or_a_later_target():
    model = tiny()
    logits = model(SOURCE, TARGETS)
    for i in range(TARGETS.shape[1]):
        changed = TARGETS.clone()
        changed[:, i:] = torch.randint(
            3, 11, changed[:, i:].shape, generator=gen(10 + i)
        )
        assert torch.equal(model(SOURCE, changed)[:, : i + 1], logits[:, : i + 1])
    changed = TARGETS.clone()
    changed[:, 0] = 9
    assert (
        model(SOURCE, changed)[:, 1:] - logits[:, 1:]
    ).abs().amax() > 1e-3  # but the past is read


def test_padding_is_invisible():
    model = tiny()
    logits = model(SOURCE, TARGETS)
    more_source_pad = torch.cat((SOURCE, torch.zeros(3, 4, dtype=torch.long)), dim=1)
    torch.testing.assert_close(model(more_source_pad, TARGETS), logits, **TOL)
    more_target_pad = torch.cat((TARGETS, torch.zeros(3, 2, dtype=torch.long)), dim=1)
    torch.testing.assert_close(model(SOURCE, more_target_pad)[:, :5], logits, **TOL)
    # the vectors at PAD positions of the source change, the mask stays: exactly nothing changes
    valid = SOURCE != PAD
    x = model.embed(SOURCE)
    noisy = x.clone()
    noisy[~valid] = (
        torch.randn(noisy[~valid].shape, generator=gen(3), dtype=noisy.dtype) * 100
    )
    dec_in = shift_right(TARGETS, BOS)
    y = model.embed(dec_in)
    a = model.decode(y, model.encode(x, valid), dec_in != PAD, valid)
    b = model.decode(y, model.encode(noisy, valid), dec_in != PAD, valid)
    assert torch.equal(a, b)
    weights = cross_attention_weights(model, SOURCE, TARGETS)  # [N, B, H, T, S]
    assert weights.shape == (2, 3, 4, 5, 6)
    assert (weights.masked_select(~valid[None, :, None, None, :]) == 0).all()
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(2, 3, 4, 5, dtype=torch.float64), **TOL
    )


def test_cross_attention_weights_leave_no_hooks_and_change_nothing():
    model = tiny()
    before = model(SOURCE, TARGETS)
    cross_attention_weights(model, SOURCE, TARGETS)
    for layer in model.decoder:
        assert (
            not layer.cross_attn._forward_hooks
            and not layer.cross_attn._forward_pre_hooks
        )
    assert torch.equal(model(SOURCE, TARGETS), before)


def test_embedding_is_shared_scaled_and_positions_are_the_sinusoids():
    model = tiny()
    assert (
        sum(p.numel() for n, p in model.named_parameters() if "embedding" in n)
        == 11 * 16
    )  # one matrix
    h = torch.randn(2, 3, 16, generator=gen(4), dtype=torch.float64)
    assert torch.equal(model.logits(h), h @ model.embedding.weight.T)
    tokens = torch.tensor([[3, 4, 5]])
    pe = torch.tensor(
        reference()["positional_encoding"]["table"], dtype=torch.float64
    )  # [5, 4]
    small = EncoderDecoder(5, 4, 1, 8, 1, dropout=0.0, max_length=5).double()
    with torch.no_grad():
        small.embedding.weight.zero_()
    torch.testing.assert_close(small.embed(torch.tensor([[3] * 5]))[0], pe, **TOL)
    expected = model.embedding.weight[tokens] * 4.0 + sinusoidal_table(
        3, 16, dtype=torch.float64
    )  # sqrt(16) = 4
    torch.testing.assert_close(model.embed(tokens), expected, **TOL)
    model.train()
    model.dropout.p = 0.5
    torch.manual_seed(0)  # nn.Dropout draws from the global generator: seeded here
    dropped = model.embed(tokens)
    assert (dropped == 0).any() and not torch.equal(
        dropped, expected
    )  # dropout on the sum (sec. 5.4)


# ---------------------------------------------------------------------------------------
# Loss and schedule


@pytest.mark.parametrize(
    "ignore_index", [PAD, -100], ids=["pad_id", "torch_default_-100"]
)
def test_label_smoothed_nll_equals_torch_cross_entropy_forward_and_backward(
    ignore_index,
):
    """Ignored positions either hold a real id (PAD = 0) or one outside the vocabulary
    (-100, PyTorch's default), which must not be gathered."""
    logits = torch.randn(
        3, 5, 11, generator=gen(5), dtype=torch.float64, requires_grad=True
    )
    targets = torch.randint(1, 11, (3, 5), generator=gen(6))
    targets[0, -2:] = ignore_index
    targets[2, 1] = ignore_index
    ours = label_smoothed_nll(logits, targets, eps=0.1, ignore_index=ignore_index)
    theirs = F.cross_entropy(
        logits.flatten(0, 1),
        targets.flatten(),
        ignore_index=ignore_index,
        label_smoothing=0.1,
    )
    torch.testing.assert_close(ours, theirs, **TOL)
    (g_ours,) = torch.autograd.grad(ours, logits)
    (g_theirs,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(g_ours, g_theirs, **TOL)
    assert (
        g_ours[targets == ignore_index] == 0
    ).all()  # ignored positions get no gradient at all
    plain = label_smoothed_nll(logits, targets, eps=0.0, ignore_index=ignore_index)
    torch.testing.assert_close(
        plain,
        F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index
        ),
        **TOL,
    )


_LOGITS = torch.randn(2, 3, 5, generator=gen(7), dtype=torch.float64)
_TARGETS = torch.tensor([[1, 2, 0], [3, 0, 0]])


@pytest.mark.parametrize(
    "logits, targets, kwargs, error, pattern",
    [
        (_LOGITS, _TARGETS, {"eps": 1.0}, ValueError, r"^eps must be in \[0, 1\)"),
        (_LOGITS, _TARGETS, {"eps": True}, TypeError, r"^eps must be a real number"),
        (
            _LOGITS,
            torch.zeros(2, 3, dtype=torch.long),
            {},
            ValueError,
            r"^targets holds nothing but ignore_index=0$",
        ),
        (
            _LOGITS,
            torch.tensor([[1, 2, 7], [3, 0, 0]]),
            {},
            ValueError,
            r"^targets holds id 7 at \[0, 2\], outside \[0, 5\) and not ignore_index=0$",
        ),
        (
            _LOGITS,
            torch.tensor([[1, 2, -1], [3, 0, 0]]),
            {},
            ValueError,
            r"^targets holds id -1 at \[0, 2\]",
        ),
        (
            _LOGITS,
            torch.tensor([[1, 2, -100], [3, 0, 0]]),
            {},
            ValueError,  # -100 is not ignored here
            r"^targets holds id -100",
        ),
        (
            _LOGITS,
            _TARGETS.float(),
            {},
            TypeError,
            r"^targets must hold class ids as torch\.long, got torch\.float32$",
        ),
        (
            _LOGITS,
            _TARGETS.int(),
            {},
            TypeError,
            r"^targets must hold class ids as torch\.long, got torch\.int32$",
        ),
        (
            _LOGITS,
            _TARGETS.tolist(),
            {},
            TypeError,
            r"^targets must hold class ids as torch\.long, got list$",
        ),
        (
            _LOGITS,
            _TARGETS[:, :2],
            {},
            ValueError,
            r"^targets must be \(2, 3\) on cpu like logits \[\.\.\., V\], got \(2, 2\) on cpu$",
        ),
        (
            _LOGITS,
            _TARGETS.flatten(),
            {},
            ValueError,
            r"^targets must be \(2, 3\) on cpu like logits \[\.\.\., V\], got \(6,\) on cpu$",
        ),
        (
            _LOGITS,
            _TARGETS.to("meta"),
            {},
            ValueError,
            r"^targets must be \(2, 3\) on cpu like logits \[\.\.\., V\], got \(2, 3\) on meta$",
        ),
        (
            torch.ones(2, 3, 5, dtype=torch.long),
            _TARGETS,
            {},
            TypeError,
            r"^logits must be a floating-point tensor, got torch\.int64$",
        ),
        (
            _LOGITS.tolist(),
            _TARGETS,
            {},
            TypeError,
            r"^logits must be a floating-point tensor, got list$",
        ),
        (
            _LOGITS,
            _TARGETS,
            {"ignore_index": 0.0},
            TypeError,
            r"^ignore_index must be an int, got float$",
        ),
        (
            _LOGITS,
            _TARGETS,
            {"ignore_index": False},
            TypeError,
            r"^ignore_index must be an int, got bool$",
        ),
    ],
    ids=[
        "eps_one",
        "eps_bool",
        "all_ignored",
        "id_beyond_vocab",
        "id_negative",
        "minus_100_not_ignored",
        "float_targets",
        "int32_targets",
        "list_targets",
        "shape_mismatch",
        "flat_targets",
        "other_device",
        "long_logits",
        "list_logits",
        "float_ignore_index",
        "bool_ignore_index",
    ],
)
def test_label_smoothed_nll_refuses_bad_input_naming_the_argument(
    logits, targets, kwargs, error, pattern
):
    kwargs = {"eps": 0.1, "ignore_index": PAD} | kwargs
    with pytest.raises(error, match=pattern) as info:
        label_smoothed_nll(logits, targets, **kwargs)
    assert type(info.value) is error


def test_label_smoothed_nll_reads_the_targets_once_and_passes_nan_logits_on():
    """One host sync, for the target check; the logits are not read: NaN logits give a NaN
    loss (as F.cross_entropy does), never a finite number and never an error."""
    loss, syncs = count_syncs(
        lambda: label_smoothed_nll(_LOGITS, _TARGETS, eps=0.1, ignore_index=PAD)
    )
    assert syncs == 1 and torch.isfinite(loss)
    nan = _LOGITS.clone()
    nan[0, 1, 2] = math.nan
    loss, syncs = count_syncs(
        lambda: label_smoothed_nll(nan, _TARGETS, eps=0.1, ignore_index=PAD)
    )
    assert syncs == 1 and loss.isnan()
    assert F.cross_entropy(
        nan.flatten(0, 1), _TARGETS.flatten(), ignore_index=PAD
    ).isnan()


def test_model_loss_ignores_pad_targets():
    model = tiny()
    logits = model(SOURCE, TARGETS)
    keep = TARGETS != PAD
    by_hand = F.cross_entropy(logits[keep], TARGETS[keep], label_smoothing=0.1)
    torch.testing.assert_close(model.loss(SOURCE, TARGETS), by_hand, **TOL)


def test_transformer_lr_is_the_formula_of_section_5_3():
    assert transformer_lr(4000, 512) == pytest.approx(512**-0.5 * 4000**-0.5, rel=1e-15)
    assert transformer_lr(1, 512) == pytest.approx(512**-0.5 * 4000**-1.5, rel=1e-15)
    assert transformer_lr(16000, 512) == pytest.approx(
        512**-0.5 / 16000**0.5, rel=1e-15
    )
    rates = [transformer_lr(s, 64, 100) for s in range(1, 400)]
    assert max(rates) == rates[99]  # the peak is at step = warmup_steps
    assert all(a < b for a, b in zip(rates[:99], rates[1:100]))
    assert all(a > b for a, b in zip(rates[99:], rates[100:]))
    with pytest.raises(ValueError, match=r"^step must be >= 1, got 0$"):
        transformer_lr(0, 512)
    with pytest.raises(TypeError, match=r"^step must be an int, got bool$"):
        transformer_lr(True, 512)
    with pytest.raises(ValueError, match=r"^warmup_steps must be >= 1, got 0$"):
        transformer_lr(1, 512, 0)


# ---------------------------------------------------------------------------------------
# Greedy decoding


def test_greedy_decode_is_the_argmax_of_its_own_teacher_forced_logits():
    model = tiny(seed=3)
    out = model.greedy_decode(SOURCE, 8)
    logits = model(SOURCE, out)
    logits[..., [PAD, BOS]] = -math.inf
    again = logits.argmax(-1)
    for row, pred in zip(out.tolist(), again.tolist()):
        stop = row.index(EOS) + 1 if EOS in row else len(row)
        assert pred[:stop] == row[:stop]
        assert all(t == PAD for t in row[stop:])


def scripted(model, script):
    """Make `model.logits` return, at decoding step k, logits preferring script[k][b] for
    row b, with PAD and BOS scored highest of all (they must still never be produced)."""
    step = {"k": 0}

    def logits(hidden):
        k = step["k"]
        step["k"] += 1
        out = torch.zeros(hidden.shape[0], model.vocab_size, dtype=hidden.dtype)
        out[:, [PAD, BOS]] = 100.0
        for b, token in enumerate(script[k]):
            out[b, token] = 50.0
        return out

    model.logits = logits
    return model


def test_greedy_decode_stops_each_row_at_eos_and_pads_after_it():
    model = scripted(tiny(), [[5, 3, 2], [2, 4, 9], [7, 2, 9], [9, 9, 9]])
    out = model.greedy_decode(SOURCE, 10)
    assert out.tolist() == [
        [5, 2, 0],
        [3, 4, 2],
        [2, 0, 0],
    ]  # stopped after 3 steps, not 10


def test_greedy_decode_stops_at_the_length_limit():
    model = scripted(tiny(), [[5, 6, 7]] * 4)
    out = model.greedy_decode(SOURCE, 4)
    assert out.tolist() == [[5] * 4, [6] * 4, [7] * 4]  # no EOS: exactly max_new_tokens


def test_greedy_decode_refuses_bad_lengths():
    model = tiny()
    with pytest.raises(ValueError, match=r"^max_new_tokens=13 > max_length=12$"):
        model.greedy_decode(SOURCE, 13)
    with pytest.raises(ValueError, match=r"^max_new_tokens must be >= 1, got 0$"):
        model.greedy_decode(SOURCE, 0)
    with pytest.raises(TypeError, match=r"^max_new_tokens must be an int, got float$"):
        model.greedy_decode(SOURCE, 2.0)


def test_greedy_decode_runs_in_eval_mode_and_restores_training():
    """As GPTLanguageModel.generate does: dropout off for the call, the mode restored after
    (also when the call fails)."""
    model = tiny(seed=3, dropout=0.5)
    expected = model.greedy_decode(SOURCE, 8)  # built in eval mode
    model.train()
    torch.manual_seed(0)  # were dropout on, these two calls would draw different masks
    first = model.greedy_decode(SOURCE, 8)
    second = model.greedy_decode(SOURCE, 8)
    assert torch.equal(first, expected) and torch.equal(second, expected)
    assert model.training and all(m.training for m in model.modules())
    with pytest.raises(ValueError, match=r"^max_new_tokens must be >= 1, got 0$"):
        model.greedy_decode(SOURCE, 0)
    assert model.training
    model.eval()
    model.greedy_decode(SOURCE, 2)
    assert not any(m.training for m in model.modules())


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("tokens, error, match", BAD_SOURCE_IDS)
def test_bad_token_ids_are_refused_with_the_argument_named(tokens, error, match):
    model = tiny()
    with pytest.raises(error, match=match):
        model(tokens, TARGETS)  # the source is checked first
    with pytest.raises(error, match=match.replace("source", "targets")):
        model(SOURCE, tokens)  # the targets before the batch sizes are compared
    with pytest.raises(error, match=match):
        model.greedy_decode(tokens, 4)
    with pytest.raises(error, match=match):
        model.loss(tokens, TARGETS)
    with pytest.raises(error, match=match.replace("source", "targets")):
        model.loss(SOURCE, tokens)  # the model's check, not the loss's second one


def test_bad_ids_in_both_are_reported_for_the_source_first():
    """One check, one host sync, for source and targets together; it names the first."""
    with pytest.raises(
        ValueError, match=r"^source\[0, 1\] = 11 is outside the vocabulary \[0, 11\)$"
    ):
        tiny()(torch.tensor([[3, 11]]), torch.tensor([[12, 3]]))
    with pytest.raises(
        ValueError, match=r"^targets\[0, 0\] = 12 is outside the vocabulary \[0, 11\)$"
    ):
        tiny()(torch.tensor([[3, 2]]), torch.tensor([[12, 3]]))


def test_mismatched_batches_are_refused():
    with pytest.raises(ValueError, match=r"^source has batch 3, targets 2$"):
        tiny()(SOURCE, TARGETS[:2])
    with pytest.raises(ValueError, match=r"^source has batch 3, targets 2$"):
        tiny().loss(SOURCE, TARGETS[:2])
    with pytest.raises(ValueError, match=r"^a has batch 1, c 2$"):
        tiny().check(a=SOURCE[:1], b=TARGETS[:1], c=SOURCE[:2])


@pytest.mark.parametrize(
    "value, error, match",
    [
        (1.0, ValueError, r"^label_smoothing must be in \[0, 1\), got 1\.0$"),
        (
            True,
            TypeError,
            r"^label_smoothing must be a real number in \[0, 1\), got bool$",
        ),
    ],
)
def test_loss_refuses_a_bad_label_smoothing_by_name_before_reading_ids(
    value, error, match
):
    model = tiny()
    with HostSyncs() as syncs, pytest.raises(error, match=match):
        model.loss(SOURCE, TARGETS, label_smoothing=value)
    assert syncs.calls == []  # refused before the ids' check


def test_ids_on_another_device_are_refused_by_name():
    model = tiny()
    with pytest.raises(ValueError, match=r"^source is on meta, the model on cpu$"):
        model(SOURCE.to("meta"), TARGETS)
    with pytest.raises(ValueError, match=r"^targets is on meta, the model on cpu$"):
        model(SOURCE, TARGETS.to("meta"))


def test_check_returns_good_ids_unchanged():
    model = tiny()
    source, targets = model.check(source=SOURCE, targets=TARGETS)
    assert source is SOURCE and targets is TARGETS
    assert model.check() == []


# ---------------------------------------------------------------------------------------
# Host syncs: the ids are read once, where they come in


def test_forward_and_loss_make_one_host_sync():
    model = tiny()
    _, syncs = count_syncs(lambda: model(SOURCE, TARGETS))
    assert syncs == 1
    _, syncs = count_syncs(lambda: model.run(SOURCE, TARGETS))
    assert syncs == 0  # the unchecked path, and every layer under it, reads nothing
    _, syncs = count_syncs(lambda: model.loss(SOURCE, TARGETS))
    assert syncs == 1  # the ids' check; the targets are not checked a second time
    model.train()  # a training step's forward and backward, dropout on
    _, syncs = count_syncs(lambda: model.loss(SOURCE, TARGETS).backward())
    assert syncs == 1


def test_smoothed_nll_is_label_smoothed_nll_without_its_checks():
    """The core reads no values; the checked function is its checks, then the core; the
    model's loss is the core on its logits, to rounding of the same operations."""
    logits = torch.randn(3, 5, 11, generator=gen(20), dtype=torch.float64)
    for ignore_index in (PAD, -100):
        targets = TARGETS.masked_fill(TARGETS == PAD, ignore_index)
        core, syncs = count_syncs(
            lambda: smoothed_nll(logits, targets, eps=0.1, ignore_index=ignore_index)
        )
        assert syncs == 0
        checked, syncs = count_syncs(
            lambda: label_smoothed_nll(
                logits, targets, eps=0.1, ignore_index=ignore_index
            )
        )
        assert syncs == 1 and torch.equal(core, checked)
    # The checks are what name a bad id; the core, unchecked, fails inside torch.gather.
    bad = TARGETS.clone()
    bad[0, 0] = 11
    with pytest.raises(ValueError, match=r"^targets holds id 11 at \[0, 0\]"):
        label_smoothed_nll(logits, bad, eps=0.1, ignore_index=PAD)
    with pytest.raises(RuntimeError, match=r"out of bounds"):
        smoothed_nll(logits, bad, eps=0.1, ignore_index=PAD)
    model = tiny()
    for eps in (0.0, 0.1):
        expected = label_smoothed_nll(
            model(SOURCE, TARGETS), TARGETS, eps=eps, ignore_index=PAD
        )
        torch.testing.assert_close(
            model.loss(SOURCE, TARGETS, label_smoothing=eps), expected, **TOL
        )


def test_greedy_decode_makes_at_most_max_new_tokens_host_syncs():
    """One for the source's ids, then one per token to ask whether every row has
    finished, except after the last."""
    model = scripted(tiny(), [[5, 6, 7]] * 6)  # never EOS: all the steps run
    out, syncs = count_syncs(lambda: model.greedy_decode(SOURCE, 6))
    assert out.shape == (3, 6) and syncs == 6
    model = scripted(
        tiny(), [[5, 3, 2], [2, 4, 9], [7, 2, 9], [9, 9, 9]]
    )  # every row done after 3
    out, syncs = count_syncs(lambda: model.greedy_decode(SOURCE, 10))
    assert out.shape == (3, 3) and syncs == 1 + 3
    out, syncs = count_syncs(lambda: tiny(seed=3).greedy_decode(SOURCE, 8))
    assert syncs <= 8


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"vocab_size": 3},
            ValueError,
            r"^vocab_size must be >= 4 \(PAD, BOS, EOS and one real token\), got 3$",
        ),
        ({"vocab_size": True}, TypeError, r"^vocab_size must be an int, got bool$"),
        (
            {"d_model": 15},
            ValueError,  # sines need their cosines
            r"^d_model must be even \(each sine of the positions has its cosine\), got 15$",
        ),
        (
            {"n_heads": 5},
            ValueError,
            r"^d_model=16 must be divisible by n_heads=5: a floored d_head would attend "
            r"in 15 of 16 dims without any error$",
        ),
        ({"n_layers": 0}, ValueError, r"^n_layers must be >= 1, got 0$"),
        ({"d_ff": 0}, ValueError, r"^d_ff must be >= 1, got 0$"),
        ({"dropout": 1.0}, ValueError, r"^dropout must be in \[0, 1\), got 1\.0$"),
        (
            {"dropout": "0.1"},
            TypeError,
            r"^dropout must be a real number in \[0, 1\), got str$",
        ),
        ({"max_length": 0}, ValueError, r"^max_length must be >= 1, got 0$"),
        (
            {"pad_id": 11},
            ValueError,
            r"^pad_id=11 is outside the vocabulary \[0, 11\)$",
        ),
        (
            {"eos_id": 1},
            ValueError,
            r"^pad_id, bos_id and eos_id must differ, got "
            r"\{'pad_id': 0, 'bos_id': 1, 'eos_id': 1\}$",
        ),
        ({"bos_id": -1}, ValueError, r"^bos_id must be >= 0, got -1$"),
        ({"bos_id": 1.0}, TypeError, r"^bos_id must be an int, got float$"),
    ],
)
def test_bad_configurations_are_refused(kwargs, error, match):
    config = {
        "vocab_size": 11,
        "d_model": 16,
        "n_heads": 4,
        "d_ff": 32,
        "n_layers": 1,
        "dropout": 0.1,
        "max_length": 8,
    } | kwargs
    with pytest.raises(error, match=match):
        EncoderDecoder(
            config.pop("vocab_size"),
            config.pop("d_model"),
            config.pop("n_heads"),
            config.pop("d_ff"),
            config.pop("n_layers"),
            **config,
        )


# ---------------------------------------------------------------------------------------
# Parameter counts


def test_parameter_floor_matches_the_golden_values():
    ref = reference()["parameter_floor"]
    floor = transformer_parameter_floor(ref["d_model"], ref["d_ff"])
    assert floor.mha_weights == ref["mha_weights"] == 1_048_576
    assert floor.ffn_weights == ref["ffn_weights"] == 2_097_152
    assert floor.encoder_layer == ref["encoder_layer"] == 3_145_728
    assert floor.decoder_layer == ref["decoder_layer"] == 4_194_304
    assert floor.ffn_share_encoder == ref["ffn_share_encoder"]
    with pytest.raises(TypeError, match=r"^d_ff must be an int, got float$"):
        transformer_parameter_floor(512, 2048.0)
    with pytest.raises(ValueError, match=r"^d_model must be >= 1, got 0$"):
        transformer_parameter_floor(0, 2048)


def test_parameter_counts_equal_numel_of_the_model():
    with torch.device("meta"):  # the base model, no memory allocated
        base = EncoderDecoder(37_000, 512, 8, 2048, 6, dropout=0.1, max_length=512)
    count = encoder_decoder_params(37_000, 512, 8, 2048, 6)
    assert sum(p.numel() for p in base.parameters()) == count.total == 63_082_496
    assert sum(p.numel() for p in base.encoder[0].parameters()) == count.encoder_layer
    assert sum(p.numel() for p in base.decoder[0].parameters()) == count.decoder_layer
    floor = transformer_parameter_floor(512, 2048)
    layer = base.encoder[0]
    matrices = [
        layer.self_attn.q_proj,
        layer.self_attn.k_proj,
        layer.self_attn.v_proj,
        layer.self_attn.o_proj,
        layer.ffn.up_proj,
        layer.ffn.down_proj,
    ]
    assert sum(m.weight.numel() for m in matrices) == floor.encoder_layer
    small = tiny()
    assert (
        sum(p.numel() for p in small.parameters())
        == encoder_decoder_params(11, 16, 4, 32, 2).total
    )


def test_the_schedule_figure_shows_the_notebooks_numbers():
    figure = (ROOT / "literate" / "figures" / "encdec.py").read_text(encoding="utf-8")
    d, warmup, steps = re.search(
        r"^NOTEBOOK_D_MODEL, NOTEBOOK_WARMUP, NOTEBOOK_STEPS = (\d+), (\d+), (\d+)$",
        figure,
        re.M,
    ).groups()
    notebook = (ROOT / "docs" / "notebooks" / "seq2seq_reverse.py").read_text(
        encoding="utf-8"
    )
    assert f"D_MODEL, N_HEADS, D_FF, N_LAYERS = {d}," in notebook
    assert f"WARMUP, STEPS, BATCH = {warmup}, {steps}," in notebook


# ---------------------------------------------------------------------------------------
# The smoke run's evidence


def check_evidence(evidence: dict) -> None:
    assert evidence["future_target_max_error"] == 0.0
    assert evidence["padded_source_max_error"] == 0.0
    assert evidence["masked_cross_probability"] == 0.0
    assert (
        evidence["source_sha256"]
        == __import__("hashlib").sha256(Path(seq2seq.__file__).read_bytes()).hexdigest()
    )
    assert evidence["dropout_configured"] == 0.1 and evidence["dropout_active"] is False
    assert evidence["logits_shape"] == [2, 4, 13]
    assert evidence["decoder_input"] == [[1, 4, 3, 2], [1, 7, 6, 5]]
    assert (
        math.log(13) * 0.5 < evidence["loss_nll"] < math.log(13) * 2
    )  # about log V at initialisation
    assert evidence["loss_label_smoothed"] != evidence["loss_nll"]
    assert (
        evidence["loss_after_step"] < evidence["loss_label_smoothed"]
    )  # one step downhill
    norms = evidence["gradient_norms"]
    assert len(norms) == 43 and all(math.isfinite(v) for v in norms.values())
    assert norms["embedding.weight"] > 0
    # The key bias cannot change a softmax (it adds the same number to every score of a row):
    assert norms["encoder.0.self_attn.k_proj.bias"] < 1e-12
    assert evidence["optimizer"]["lr"] == transformer_lr(1, 8)
    assert evidence["optimizer_steps"] == 1 and evidence["update_norm"] > 0
    assert evidence["parameters"] == encoder_decoder_params(13, 8, 2, 16, 1).total


def test_smoke_in_process():
    evidence = smoke()
    check_evidence(evidence)
    json.dumps(evidence, allow_nan=False)  # plain JSON values only
    assert smoke()["gradient_norms"] == evidence["gradient_norms"]  # deterministic


def test_smoke_entry_point_prints_the_same_json(smoke_process):
    stdout, stderr = smoke_process.communicate(timeout=120)
    assert smoke_process.returncode == 0, stderr
    printed = json.loads(stdout)
    check_evidence(printed)
    assert printed == json.loads(json.dumps(smoke()))


def test_entry_point_without_smoke_explains_itself(capsys):
    with pytest.raises(SystemExit) as exit_info:
        seq2seq.main([])
    assert exit_info.value.code == 2 and "--smoke" in capsys.readouterr().err
