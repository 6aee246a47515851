"""Chapter 5: the GPT-2 block and model against Hugging Face's GPT2Block / GPT2LMHeadModel
(forward and backward, float64), the parameter count, the block's contracts (zeroed
sublayers are the identity, no leak from the future, the FFN reads the attention-updated
stream, causal without being asked), generation's stops, cropping and `choose=` (greedy
by default, chapter 6's sampler), the host syncs of a forward and of generation, and
every error path of literate/models/gpt2.py.
Loading Hugging Face weights by state dict and the configuration checks:
tests/test_gpt2_loading.py.

Tolerance: 1e-12 absolute in float64. Ours and Hugging Face's compute the same sums in a
different order (one packed c_attn matmul against three, softmax of scores plus an additive
-inf mask against a masked softmax), so agreement is to rounding, ~1e-15 per value; 1e-12
leaves room for the few hundred operations in a row while still catching any real
difference (a wrong transpose, a missing scale or bias is off by 1e-2 or more).
"""

from __future__ import annotations

import copy
import inspect
import math
import re

import pytest
import torch
import torch.nn.functional as F

from literate.decoding.sampling import greedy, sampler
from literate.models.gpt2 import (
    GPTLanguageModel,
    copy_hf_gpt2,
    copy_hf_gpt2_block,
    gpt2_from_hf_config,
    gpt2_init_,
    gpt2_model,
    hf_activation,
    next_token_loss,
    period_windows,
    train_period_lm,
)
from literate.numbers.params import gpt2_params
from literate.parts.blocks import PreNormBlock, gpt2_block
from literate.parts.ffn import gelu_tanh
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.norms import LayerNorm
from literate.parts.positions import LearnedPositions
from literate.tools.syncs import HostReads as HostSyncs

from harness import gpt2_settings, hf_causal_mask

TOL = dict(atol=1e-12, rtol=0)
D, H, LAYERS, CONTEXT, VOCAB = 16, 4, 3, 12, 11


def rand(*shape, seed=0):
    return torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )


def count_syncs(call):
    """(what `call()` returned, how many host syncs it made)."""
    with HostSyncs() as syncs:
        result = call()
    return result, len(syncs.calls)


@pytest.fixture(scope="module")
def hf():
    """Hugging Face's GPT-2 classes and a small eager, dropout-free config (imported once)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    config = GPT2Config(
        **gpt2_settings(D, H, LAYERS, CONTEXT, VOCAB), attn_implementation="eager"
    )
    return {
        "config": config,
        "Config": GPT2Config,
        "Block": GPT2Block,
        "LM": GPT2LMHeadModel,
    }


def hf_block(hf, seed=0):
    torch.manual_seed(seed)
    block = hf["Block"](hf["config"], layer_idx=0).double()
    with (
        torch.no_grad()
    ):  # O(1) weights, so that every term matters (default init is 0.02)
        for p in block.parameters():
            p.copy_(
                rand(*p.shape, seed=seed + p.numel()) * 0.3
                + (1.0 if p.ndim == 1 and p.numel() == D else 0.0)
            )
    return block


def tiny_pair(hf, seed=0):
    torch.manual_seed(seed)
    theirs = hf["LM"](hf["config"]).double().eval()
    g = torch.Generator().manual_seed(seed)
    with (
        torch.no_grad()
    ):  # matrices of order one: varied continuations, not one token repeated
        for p in theirs.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.3, generator=g)
    ours = copy_hf_gpt2(gpt2_from_hf_config(hf["config"]).double(), theirs).eval()
    return ours, theirs


# ---------------------------------------------------------------------------------------
# Equal to Hugging Face


def test_block_equals_hf_gpt2block_forward_and_every_gradient(hf):
    theirs = hf_block(hf)
    ours = gpt2_block(D, H, dropout=0.0).double()
    copy_hf_gpt2_block(ours, theirs)
    x = rand(2, 7, D, seed=1).requires_grad_()
    a, b = ours(x), theirs(x, attention_mask=hf_causal_mask(7))
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(
        2, 7, D, seed=2
    )  # a random upstream gradient: every output entry weighted differently
    ga = torch.autograd.grad((a * probe).sum(), (x, *ours.parameters()))
    gb = torch.autograd.grad((b * probe).sum(), (x, *theirs.parameters()))
    torch.testing.assert_close(ga[0], gb[0], **TOL)
    # Their gradients, put into our layout by the same (forward-verified) copy.
    grads_as_hf = copy.deepcopy(theirs)
    with torch.no_grad():
        for p, g in zip(grads_as_hf.parameters(), gb[1:]):
            p.copy_(g)
    grads_as_ours = gpt2_block(D, H, dropout=0.0).double()
    copy_hf_gpt2_block(grads_as_ours, grads_as_hf)
    names = [n for n, _ in ours.named_parameters()]
    assert (
        len(names) == 16
    )  # q, k, v, o, up, down (weight and bias), two norms (gain and bias)
    for name, mine, reference in zip(names, ga[1:], grads_as_ours.parameters()):
        torch.testing.assert_close(mine, reference, **TOL, msg=name)


def test_hf_eager_block_without_a_mask_is_not_causal(hf):
    """Why the tests pass a mask: the eager GPT2Block alone attends to the future."""
    theirs = hf_block(hf)
    x = rand(1, 5, D)
    x2 = x.clone()
    x2[:, -1] = rand(
        1, D, seed=9
    )  # a new last token (not a constant shift: LayerNorm would erase it)
    assert not torch.allclose(theirs(x)[:, 0], theirs(x2)[:, 0], atol=1e-6)


def test_model_logits_and_gradients_equal_gpt2lmheadmodel(hf):
    ours, theirs = tiny_pair(hf)
    ids = torch.randint(
        0, VOCAB, (3, CONTEXT), generator=torch.Generator().manual_seed(0)
    )
    a, b = ours(ids), theirs(ids).logits
    torch.testing.assert_close(a, b, **TOL)
    probe = rand(*a.shape, seed=3)
    ga = torch.autograd.grad((a * probe).sum(), ours.token_embedding.weight)[0]
    gb = torch.autograd.grad((b * probe).sum(), theirs.transformer.wte.weight)[0]
    torch.testing.assert_close(
        ga, gb, **TOL
    )  # tied on both sides: embedding use + head use


def test_greedy_generation_identical_to_hf_generate(hf):
    """Hugging Face's own generate(do_sample=False) (with its KV cache) against ours (which
    re-reads the whole window every step): the same tokens, with and without EOS."""
    ours, theirs = tiny_pair(hf, seed=1)
    prompt = torch.tensor([[1, 2, 3, 4], [9, 0, 9, 0]])
    real = torch.ones_like(prompt)  # Hugging Face's 0/1 attention_mask: no padding
    mine = ours.generate(prompt, 8)
    reference = theirs.generate(
        prompt, attention_mask=real, max_new_tokens=8, do_sample=False
    )
    assert torch.equal(mine, reference)
    assert len(set(mine[:, 4:].flatten().tolist())) >= 3  # not one token repeated
    for column in (5, 6, 8):  # EOS = a token of row 0, at several steps
        eos = int(mine[0, column])
        mine_eos = ours.generate(prompt, 8, eos_id=eos)
        reference_eos = theirs.generate(
            prompt,
            attention_mask=real,
            max_new_tokens=8,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        assert torch.equal(mine_eos, reference_eos)


def test_gelu_tanh_is_hf_gelu_new(hf):
    from transformers.activations import ACT2FN

    x = torch.linspace(-6, 6, 241, dtype=torch.float64)
    torch.testing.assert_close(gelu_tanh(x), ACT2FN["gelu_new"](x), atol=1e-15, rtol=0)
    assert hf_activation("gelu_new") is gelu_tanh and hf_activation("gelu") is F.gelu


# ---------------------------------------------------------------------------------------
# Parameter count


def test_gpt2_small_parameter_count_on_the_meta_device(hf):
    count = gpt2_params(50_257, 1_024, 768, 12, 12)
    assert count.total == 124_439_808
    assert count.per_block == 12 * 768**2 + 13 * 768
    with torch.device("meta"):  # shapes only: nothing is allocated
        theirs = hf["LM"](hf["Config"]())
        ours = gpt2_from_hf_config(hf["Config"](attn_pdrop=0.0))
        untied = hf["LM"](hf["Config"](tie_word_embeddings=False))
    assert sum(p.numel() for p in theirs.parameters()) == count.total
    assert sum(p.numel() for p in ours.parameters()) == count.total
    assert (
        sum(p.numel() for p in untied.parameters())
        == gpt2_params(50_257, 1_024, 768, 12, 12, tied=False).total
    )


@pytest.mark.parametrize(
    "shape", [(11, 12, 16, 4, 3, None), (7, 5, 8, 2, 1, 20), (100, 64, 32, 8, 2, 96)]
)
def test_formula_equals_numel_of_our_model(shape):
    vocab, context, d, heads, layers, d_ff = shape
    model = gpt2_model(vocab, context, d, heads, layers, d_ff=d_ff)
    assert (
        sum(p.numel() for p in model.parameters())
        == gpt2_params(vocab, context, d, heads, layers, d_ff=d_ff).total
    )


# ---------------------------------------------------------------------------------------
# The block's contracts


def test_zeroed_sublayers_make_the_pre_norm_block_exactly_the_identity():
    block = (
        gpt2_block(D, H, dropout=0.3).double().train()
    )  # dropout of zero is still zero
    with torch.no_grad():
        for layer in (block.attn.o_proj, block.ffn.down_proj):
            layer.weight.zero_()
            layer.bias.zero_()
    x = rand(2, 5, D)
    assert torch.equal(block(x), x)


def test_future_cannot_leak_back_and_position_zero_reaches_forward():
    torch.manual_seed(0)
    block = gpt2_block(D, H, dropout=0.0).double().eval()
    x = rand(2, 6, D)
    t = 3
    future = x.clone()
    future[:, t + 1 :] = rand(2, 2, D, seed=5)
    past = x.clone()
    past[:, 0] = rand(2, D, seed=6)
    out, out_future, out_past = block(x), block(future), block(past)
    assert torch.equal(
        out[:, : t + 1], out_future[:, : t + 1]
    )  # exactly: not one bit moves
    assert not torch.allclose(out[:, t + 1 :], out_future[:, t + 1 :], atol=1e-6)
    assert (
        (out[:, 1:] - out_past[:, 1:]).abs().amax(-1) > 1e-3
    ).all()  # every later position moved


def test_serial_pre_norm_ffn_reads_the_attention_updated_stream():
    torch.manual_seed(0)
    block = gpt2_block(D, H, dropout=0.0).double()
    seen = {}
    hooks = [
        block.attn.register_forward_hook(
            lambda m, args, out: seen.update(attn_in=args[0], attn_out=out)
        ),
        block.ffn.register_forward_hook(
            lambda m, args, out: seen.update(ffn_in=args[0])
        ),
    ]
    x = rand(2, 5, D)
    block(x)  # one real forward call
    for h in hooks:
        h.remove()
    torch.testing.assert_close(seen["attn_in"], block.attn_norm(x), **TOL)
    torch.testing.assert_close(
        seen["ffn_in"], block.ffn_norm(x + seen["attn_out"]), **TOL
    )
    assert not torch.allclose(seen["ffn_in"], block.ffn_norm(x), atol=1e-3)


def test_the_block_is_causal_without_being_asked():
    params = inspect.signature(PreNormBlock.forward).parameters
    assert not {"causal", "mask", "attn_mask", "causal_mask"} & set(
        params
    )  # no way to switch it off
    torch.manual_seed(0)
    block = gpt2_block(D, H, dropout=0.0).double()
    x = rand(1, 5, D)
    explicit = x + block.attn(block.attn_norm(x), causal=True)
    explicit = explicit + block.ffn(block.ffn_norm(explicit))
    assert torch.equal(block(x), explicit)


def test_model_is_causal_and_an_unmasked_attention_is_not():
    torch.manual_seed(0)
    model = gpt2_model(VOCAB, CONTEXT, D, H, 2, dropout=0.0).double().eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    changed = torch.tensor([[1, 2, 3, 4, 9]])
    assert torch.equal(model(ids)[:, :4], model(changed)[:, :4])
    attn = MultiHeadAttention(D, H).double()
    emb = torch.nn.Embedding(VOCAB, D).double()
    a, b = emb(ids), emb(changed)
    assert torch.equal(attn(a, causal=True)[:, :4], attn(b, causal=True)[:, :4])
    assert (
        attn(a, causal=False)[:, :4] - attn(b, causal=False)[:, :4]
    ).abs().amax() > 1e-3


# ---------------------------------------------------------------------------------------
# The model: tying, init, loss, data


def test_head_is_tied_to_the_token_embedding():
    model = gpt2_model(VOCAB, CONTEXT, D, H, 1)
    assert model.lm_head.weight is model.token_embedding.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "token_embedding.weight" in names


def test_gpt2_init():
    torch.manual_seed(0)
    model = gpt2_model(VOCAB, CONTEXT, 256, 4, 8)
    w = model.blocks[0].ffn.up_proj.weight
    residual = torch.cat([b.ffn.down_proj.weight.flatten() for b in model.blocks])
    assert abs(w.std().item() - 0.02) < 1e-3
    assert abs(residual.std().item() - 0.02 / math.sqrt(16)) < 2e-4
    assert all(
        (b.attn.q_proj.bias == 0).all() and (b.attn_norm.weight == 1).all()
        for b in model.blocks
    )
    assert gpt2_init_(model) is model


def test_the_stream_starts_at_the_scale_the_gradient_study_uses():
    """Chapter 5's study feeds GPT-2's blocks Gaussian vectors of std GPT2_INPUT_STD;
    a GPT-2 at init hands its first block token + position rows of that RMS."""
    from literate.numbers.studies import GPT2_INPUT_STD

    assert GPT2_INPUT_STD == 0.02 * math.sqrt(2)
    torch.manual_seed(3)
    model = gpt2_model(1000, 64, 128, 4, 1)
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        stream = model.positions(model.token_embedding(ids))
    assert abs(stream.pow(2).mean().sqrt().item() / GPT2_INPUT_STD - 1) < 0.03


def test_next_token_loss_shifts_by_one():
    torch.manual_seed(0)
    model = gpt2_model(VOCAB, CONTEXT, D, H, 1, dropout=0.0).double()
    ids = torch.randint(0, VOCAB, (2, 6), generator=torch.Generator().manual_seed(1))
    logits = model(ids[:, :5])
    manual = -torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).mean()
    torch.testing.assert_close(next_token_loss(model, ids), manual, **TOL)


def test_period_windows():
    w = period_windows([0, 1, 2], 4, 3)  # 12 tokens, windows of 4
    assert w.shape == (9, 4) and w.dtype == torch.long
    assert w[0].tolist() == [0, 1, 2, 0] and w[-1].tolist() == [2, 0, 1, 2]
    with pytest.raises(
        ValueError,
        match=r"^the repeated period has 4 tokens, need more than context=4$",
    ):
        period_windows([0, 1], 2, 4)
    with pytest.raises(TypeError, match=r"^repeats must be an int, got float$"):
        period_windows([0, 1], 2.0, 1)


# ---------------------------------------------------------------------------------------
# Generation: stops, cropping, choosing


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(3)
    return gpt2_model(VOCAB, 6, D, H, 1, dropout=0.0).double().eval()


def test_length_stop_and_prompt_kept(small):
    prompt = torch.tensor([[1, 2], [3, 4]])
    out = small.generate(prompt, 5)
    assert out.shape == (2, 7) and torch.equal(out[:, :2], prompt)


def test_eos_stop_keeps_eos_and_finished_rows_repeat_it(small):
    prompt = torch.tensor([[1, 2], [3, 4]])
    free = small.generate(prompt, 9)
    eos = int(free[0, 3])  # row 0's second new token
    out = small.generate(prompt, 9, eos_id=eos)
    row0 = out[0, 2:].tolist()
    first = row0.index(eos)
    assert first <= 1 and all(t == eos for t in row0[first:])
    done = [
        (r[2:] == eos).nonzero()[0].item() if (r[2:] == eos).any() else None
        for r in out
    ]
    assert out.shape[1] == 2 + 9 or all(
        d is not None for d in done
    )  # stops only when every row is done
    single = small.generate(prompt[:1], 9, eos_id=eos)
    assert (
        single[0, -1] == eos and single.shape[1] == 2 + first + 1
    )  # one row: stops right at EOS


def test_context_cropping(small):
    long = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9]])  # 9 tokens, 6 positions
    with pytest.raises(ValueError, match=r"^ids has 9 tokens > max_length=6$"):
        small(long)
    out = small.generate(long, 4)
    assert out.shape == (1, 13)
    cropped = small.generate(long[:, -6:], 4)  # only the last 6 tokens are ever read
    assert torch.equal(out[:, 9:], cropped[:, 6:])


def test_generate_runs_in_eval_mode_and_restores_training():
    torch.manual_seed(0)
    model = gpt2_model(VOCAB, CONTEXT, D, H, 1, dropout=0.5).train()
    prompt = torch.tensor([[1, 2, 3]])
    assert torch.equal(
        model.generate(prompt, 6), model.generate(prompt, 6)
    )  # no dropout inside
    assert model.training
    with pytest.raises(
        TypeError, match=r"^choose must be a function logits -> ids, got int$"
    ):
        model.generate(prompt, 2, choose=1)
    assert model.training  # restored after a refusal too


def test_greedy_is_the_default_choice_argmax_ties_to_the_lowest_id(small):
    assert (
        inspect.signature(GPTLanguageModel.generate).parameters["choose"].default
        is greedy
    )
    logits = torch.tensor(
        [[0.0, 2.0, 2.0, 1.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -3.0, -2.0, -1.0]]
    )
    assert greedy(logits).tolist() == [1, 0, 0]
    prompt = torch.tensor([[1, 2], [5, 6]])
    assert torch.equal(
        small.generate(prompt, 6), small.generate(prompt, 6, choose=greedy)
    )


def test_generate_passes_the_last_positions_logits_to_choose(small):
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    seen = []

    def choose(logits):
        seen.append(logits)
        return greedy(logits)

    out = small.generate(prompt, 3, choose=choose)
    assert [tuple(s.shape) for s in seen] == [(2, VOCAB)] * 3
    with torch.no_grad():
        for step, logits in enumerate(seen):
            torch.testing.assert_close(logits, small(out[:, : 3 + step])[:, -1], **TOL)


def test_sampling_with_choose(small):
    prompt = torch.tensor([[1, 2], [7, 3]])
    greedy_out = small.generate(prompt, 6)
    assert torch.equal(small.generate(prompt, 6, choose=sampler(top_k=1)), greedy_out)

    def draw(seed, **settings):
        return small.generate(
            prompt,
            6,
            choose=sampler(
                temperature=2.0,
                **settings,
                generator=torch.Generator().manual_seed(seed),
            ),
        )

    assert torch.equal(draw(0), draw(0))  # reproducible with a seeded generator
    assert any(
        not torch.equal(draw(0), draw(s)) for s in range(1, 6)
    )  # and it does sample
    for out in (draw(1), draw(2, top_k=3), draw(3, top_p=0.9)):
        assert out.shape == (2, 8) and torch.equal(out[:, :2], prompt)
        assert ((out >= 0) & (out < VOCAB)).all()  # only ids of the vocabulary
    long = small.generate(
        prompt,
        40,
        choose=sampler(temperature=3.0, generator=torch.Generator().manual_seed(4)),
    )
    assert ((long >= 0) & (long < VOCAB)).all() and long.shape == (
        2,
        42,
    )  # past the context, cropped


def test_sampling_with_eos_stops_finished_rows_like_greedy(small):
    prompt = torch.tensor([[1, 2], [3, 4]])
    choose = sampler(temperature=1.5, generator=torch.Generator().manual_seed(5))
    out = small.generate(prompt, 30, eos_id=0, choose=choose)
    for row in out[:, 2:].tolist():
        if 0 in row:
            assert all(
                t == 0 for t in row[row.index(0) :]
            )  # a finished row repeats EOS
    assert out.shape[1] == 32 or (out[:, 2:] == 0).any(-1).all()


# ---------------------------------------------------------------------------------------
# Host syncs: values are read where ids come in, never inside the layers


def test_forward_makes_at_most_one_host_sync():
    torch.manual_seed(0)
    model = gpt2_model(VOCAB, CONTEXT, D, H, 2, dropout=0.0).eval()
    ids = torch.randint(
        0, VOCAB, (2, CONTEXT), generator=torch.Generator().manual_seed(1)
    )
    _, syncs = count_syncs(lambda: model(ids))
    assert syncs <= 1
    _, syncs = count_syncs(lambda: model.run(ids))
    assert syncs == 0  # the unchecked path reads nothing
    _, syncs = count_syncs(lambda: model.blocks[0](torch.randn(2, 5, D)))
    assert syncs == 0
    _, syncs = count_syncs(lambda: next_token_loss(model, ids))
    assert syncs <= 1


def test_generate_makes_one_host_sync_for_the_prompt_and_one_per_token_for_eos(small):
    """One for the prompt's ids; with eos_id, one per token to ask whether every row is
    done, except after the last; without eos_id, none per token, whatever `choose`."""
    prompt = torch.tensor([[1, 2], [3, 4]])
    n = 8

    def scripted(
        tokens,
    ):  # a `choose` that emits tokens[0], tokens[1], ... in every row
        steps = iter(tokens)
        return lambda logits: torch.full(
            (logits.shape[0],), next(steps), dtype=torch.long
        )

    out, syncs = count_syncs(lambda: small.generate(prompt, n))
    assert out.shape == (2, 2 + n) and syncs == 1
    choose = sampler(
        temperature=0.9, top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(0)
    )
    out, syncs = count_syncs(lambda: small.generate(prompt, n, choose=choose))
    assert out.shape == (2, 2 + n) and syncs == 1
    out, syncs = count_syncs(
        lambda: small.generate(prompt, n, eos_id=1, choose=scripted([0] * n))
    )
    assert out.shape == (2, 2 + n) and syncs == n  # EOS never comes: 1 + (n - 1)
    out, syncs = count_syncs(
        lambda: small.generate(prompt, n, eos_id=1, choose=scripted([0, 0, 1]))
    )
    assert (
        out[:, 2:].tolist() == [[0, 0, 1]] * 2 and syncs == 1 + 3
    )  # stopped at the third token
    out, syncs = count_syncs(
        lambda: small.generate(
            prompt, n, eos_id=1, choose=scripted([0] * (n - 1) + [1])
        )
    )
    assert (
        out.shape == (2, 2 + n) and syncs == n
    )  # EOS as the last token: no question after it


# ---------------------------------------------------------------------------------------
# Error paths


@pytest.mark.parametrize(
    "ids, error, pattern",
    [
        ([[1, 2]], TypeError, r"^ids must hold token ids as torch\.long, got list$"),
        (
            torch.tensor([[1.0, 2.0]]),
            TypeError,
            r"^ids must hold token ids as torch\.long, got torch\.float32$",
        ),
        (
            torch.tensor([[1, 2]], dtype=torch.int32),
            TypeError,
            r"^ids must hold token ids as torch\.long, got torch\.int32$",
        ),
        (
            torch.tensor([1, 2]),
            ValueError,
            r"^ids must have shape \[B, T\], B, T >= 1, got \(2,\)$",
        ),
        (
            torch.zeros(1, 0, dtype=torch.long),
            ValueError,
            r"^ids must have shape \[B, T\], B, T >= 1, got \(1, 0\)$",
        ),
        (
            torch.tensor([[1, VOCAB]]),
            ValueError,
            rf"^ids\[0, 1\] = {VOCAB} is outside the vocabulary \[0, {VOCAB}\)$",
        ),
        (
            torch.tensor([[2, 3], [4, -1]]),
            ValueError,
            rf"^ids\[1, 1\] = -1 is outside the vocabulary \[0, {VOCAB}\)$",
        ),
        (
            torch.zeros(1, 7, dtype=torch.long),
            ValueError,
            r"^ids has 7 tokens > max_length=6$",
        ),
    ],
)
def test_forward_refuses_bad_ids(small, ids, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        small(ids)
    assert type(info.value) is error


def test_ids_on_another_device_than_the_model_are_refused():
    """As EncoderDecoder.check does: a ValueError naming ids, not an error from inside
    nn.Embedding. The meta device stands in for a GPU: no memory, no accelerator needed."""
    model = gpt2_model(VOCAB, CONTEXT, D, H, 1, dropout=0.0).to("meta")
    ids = torch.tensor([[1, 2]])  # on the CPU
    with pytest.raises(ValueError, match=r"^ids is on cpu, the model on meta$"):
        model(ids)
    with pytest.raises(ValueError, match=r"^ids is on cpu, the model on meta$"):
        model.generate(ids, 2)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(max_new_tokens=0), ValueError, r"^max_new_tokens must be >= 1, got 0$"),
        (
            dict(max_new_tokens=True),
            TypeError,
            r"^max_new_tokens must be an int, got bool$",
        ),
        (
            dict(max_new_tokens=2.0),
            TypeError,
            r"^max_new_tokens must be an int, got float$",
        ),
        (
            dict(eos_id=VOCAB),
            ValueError,
            rf"^eos_id must be < vocabulary size {VOCAB}, got {VOCAB}$",
        ),
        (dict(eos_id=-1), ValueError, r"^eos_id must be >= 0, got -1$"),
        (dict(eos_id=1.0), TypeError, r"^eos_id must be an int, got float$"),
        (
            dict(choose=3),
            TypeError,
            r"^choose must be a function logits -> ids, got int$",
        ),
        (
            dict(choose="greedy"),
            TypeError,
            r"^choose must be a function logits -> ids, got str$",
        ),
        (
            dict(choose=sampler(top_k=VOCAB + 1)),
            ValueError,  # known only once the vocabulary is
            rf"^top_k must be in \[1, vocabulary size {VOCAB}\], got {VOCAB + 1}$",
        ),
        # The sampling keywords of before are gone: a loud TypeError, never silently ignored.
        (
            dict(do_sample=True),
            TypeError,
            r"^DecoderLanguageModel\.generate\(\) got an unexpected keyword argument 'do_sample'$",
        ),
        (
            dict(temperature=0.5),
            TypeError,
            r"^DecoderLanguageModel\.generate\(\) got an unexpected keyword argument 'temperature'$",
        ),
    ],
)
def test_generate_refuses_bad_settings(small, kwargs, error, pattern):
    kwargs = {"max_new_tokens": 3, **kwargs}
    with pytest.raises(error, match=pattern) as info:
        small.generate(torch.tensor([[1, 2]]), **kwargs)
    assert type(info.value) is error


def test_generate_refuses_bad_ids(small):
    with pytest.raises(
        ValueError,
        match=rf"^ids\[0, 0\] = {VOCAB} is outside the vocabulary \[0, {VOCAB}\)$",
    ):
        small.generate(torch.tensor([[VOCAB]]), 2)
    with pytest.raises(
        TypeError, match=r"^ids must hold token ids as torch\.long, got torch\.float32$"
    ):
        small.generate(torch.tensor([[1.0]]), 2)


def test_next_token_loss_checks_every_id_the_target_column_too(small):
    """The last column is only a target, never an input: it is checked all the same (an
    out-of-range target would otherwise reach F.cross_entropy)."""
    ok = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert torch.isfinite(next_token_loss(small, ok))
    bad = ok.clone()
    bad[1, -1] = VOCAB
    with pytest.raises(
        ValueError,
        match=rf"^ids\[1, 2\] = {VOCAB} is outside the vocabulary \[0, {VOCAB}\)$",
    ):
        next_token_loss(small, bad)
    bad[1, -1] = -1
    with pytest.raises(
        ValueError,
        match=rf"^ids\[1, 2\] = -1 is outside the vocabulary \[0, {VOCAB}\)$",
    ):
        next_token_loss(small, bad)
    with pytest.raises(
        ValueError,
        match=r"^ids must have T \+ 1 >= 2 tokens \(inputs and their next\), got \(1, 1\)$",
    ):
        next_token_loss(small, torch.tensor([[1]]))
    with pytest.raises(
        ValueError, match=r"^ids has 8 tokens > max_length=7$"
    ):  # context + 1: inputs and targets
        next_token_loss(small, torch.zeros(1, 8, dtype=torch.long))
    assert torch.isfinite(next_token_loss(small, torch.zeros(1, 7, dtype=torch.long)))
    with pytest.raises(
        TypeError, match=r"^model must be a DecoderLanguageModel, got PreNormBlock$"
    ):
        next_token_loss(small.blocks[0], ok)


def test_constructor_errors():
    emb, pos, norm = (
        torch.nn.Embedding(VOCAB, D),
        LearnedPositions(CONTEXT, D),
        LayerNorm(D),
    )
    block = gpt2_block(D, H)
    with pytest.raises(
        TypeError, match=r"^token_embedding must be an nn\.Embedding, got Linear$"
    ):
        GPTLanguageModel(torch.nn.Linear(D, VOCAB), pos, [block], norm)
    with pytest.raises(
        TypeError, match=r"^positions must be a LearnedPositions, got Embedding$"
    ):
        GPTLanguageModel(emb, torch.nn.Embedding(CONTEXT, D), [block], norm)
    with pytest.raises(ValueError, match=r"^blocks must hold at least one block$"):
        GPTLanguageModel(emb, pos, [], norm)
    with pytest.raises(
        ValueError,
        match=r"^the parts must share one width d_model, got "
        r"\{'positions': 18, 'final_norm': 16, 'blocks\[0\]': 16\}$",
    ):
        GPTLanguageModel(emb, LearnedPositions(CONTEXT, D + 2), [block], norm)
    with pytest.raises(
        ValueError,
        match=r"^the parts must share one width d_model, got "
        r"\{'positions': 16, 'final_norm': 16, 'blocks\[0\]': 16, 'blocks\[1\]': 20\}$",
    ):
        GPTLanguageModel(emb, pos, [block, gpt2_block(D + 4, H)], norm)
    with pytest.raises(
        ValueError, match=r"^token_embedding has width 18, the other parts 16$"
    ):
        GPTLanguageModel(torch.nn.Embedding(VOCAB, D + 2), pos, [block], norm)
    with pytest.raises(
        TypeError,
        match=r"^blocks\[0\] must be an nn\.Module with an int d_model \(its width\), got function$",
    ):
        GPTLanguageModel(emb, pos, [lambda x: x], norm)
    with pytest.raises(
        TypeError,
        match=r"^final_norm must be an nn\.Module with an int d_model \(its width\), got torch\.nn\.modules\.normalization\.LayerNorm$",
    ):
        GPTLanguageModel(
            emb, pos, [block], torch.nn.LayerNorm(D)
        )  # torch's LayerNorm has no d_model
    with pytest.raises(TypeError, match=r"^vocab_size must be an int, got float$"):
        gpt2_model(11.0, CONTEXT, D, H, 1)
    with pytest.raises(ValueError, match=r"^n_layers must be >= 1, got 0$"):
        gpt2_model(VOCAB, CONTEXT, D, H, 0)
    with pytest.raises(
        ValueError,
        match=r"^d_model=10 must be divisible by n_heads=4: a floored d_head would "
        r"attend in 8 of 10 dims without any error$",
    ):
        gpt2_model(VOCAB, CONTEXT, 10, 4, 1)  # 10 heads-width does not divide
    with pytest.raises(ValueError, match=r"^std must be finite and > 0, got 0\.0$"):
        gpt2_init_(gpt2_model(VOCAB, CONTEXT, D, H, 1), std=0.0)


@pytest.mark.parametrize(
    "dropout, error, got",
    [
        (1.0, ValueError, "1.0"),
        (-0.1, ValueError, "-0.1"),
        (math.nan, ValueError, "nan"),
        ("0.1", TypeError, "str"),
        (True, TypeError, "bool"),
        (None, TypeError, "NoneType"),
        (torch.tensor(0.1), TypeError, "Tensor"),
    ],
)
def test_dropout_is_a_probability_wrong_kind_type_error_wrong_value_value_error(
    dropout, error, got
):
    emb, pos, norm = (
        torch.nn.Embedding(VOCAB, D),
        LearnedPositions(CONTEXT, D),
        LayerNorm(D),
    )
    blocks = [gpt2_block(D, H)]
    kind = "a real number in" if error is TypeError else "in"
    with pytest.raises(
        error, match=rf"^dropout must be {kind} \[0, 1\), got {re.escape(got)}$"
    ) as info:
        GPTLanguageModel(emb, pos, blocks, norm, dropout=dropout)
    assert type(info.value) is error
    assert (
        GPTLanguageModel(emb, pos, blocks, norm, dropout=0).dropout.p == 0.0
    )  # an int 0 is a probability


def test_gpt2_params_errors():
    with pytest.raises(TypeError, match=r"^vocab_size must be an int, got bool$"):
        gpt2_params(True, 8, 8, 2, 1)
    with pytest.raises(ValueError, match=r"^d_ff must be >= 1, got 0$"):
        gpt2_params(5, 8, 8, 2, 1, d_ff=0)
    with pytest.raises(TypeError, match=r"^tied must be a bool, got int$"):
        gpt2_params(5, 8, 8, 2, 1, tied=1)
    with pytest.raises(ValueError, match=r"^d_model=8 must be divisible by n_heads=3$"):
        gpt2_params(5, 8, 8, 3, 1)


def test_train_period_lm_signature():
    """The page trains it (docs/eras/gpt2.md); here only its contract with the reference."""
    params = inspect.signature(train_period_lm).parameters
    assert list(params)[:1] == ["settings"]
