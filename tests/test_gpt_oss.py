"""gpt-oss against Hugging Face: the tiny model (3 layers: sliding, full, sliding;
window 4; 4 experts, top-2; YaRN as released) built from a `GptOssConfig` and loaded
from `GptOssForCausalLM`'s weights == HF (logits, every gradient, the balancing loss),
greedy cached decoding past the window == HF `generate`, refusals by field name.

Float64, experts_implementation="eager". HF's RMSNorm computes in float32, so twice
(as tests/test_mixtral.py): HF as it is, each tensor within a bound of float32 units of
its largest entry (and further than 1e-12: the float32 steps are there); HF with its
norms patched to compute in float64, 1e-12. Its sink softmax already runs in the input
dtype. The float32 bounds are set from ten draws of the weights (seeds 0-9, this
fixture's recipe): the logits and router logits came within 8.5 units, the parameter
gradients within 64 (the sinks' and first router's, whose gradients come back through
all seven float32 norms, forward and backward); F32_OUTPUTS = 16 and F32_GRADIENTS = 256
leave a factor of 2 and 4 for another torch's float32 kernels.

Float32 too, where torch has F.grouped_mm: our experts take dispatch's grouped path
(each (token, expert) pair once), HF's its eager loop, every step float32 on both
sides. Measured on the same ten draws: logits and router logits within 14.0 units,
parameter gradients within 57.8; F32_ALL_OUTPUTS = 32 and F32_GRADIENTS = 256 leave a
factor of 2 and 4.
"""

from __future__ import annotations

import re

import pytest
import torch
from transformers import GptOssConfig, GptOssForCausalLM
from transformers.models.gpt_oss import modeling_gpt_oss

from literate.decoding.generate import generate
from literate.models.gpt_oss import (
    HF_GPT_OSS_NAMES,
    check_gpt_oss_config,
    gpt_oss_aux_loss,
    gpt_oss_from_hf_config,
    load_hf_gpt_oss,
)
from literate.parts.moe import GptOssExperts
from literate.parts.rope_scaling import YarnRotaryEmbedding
from literate.parts.sinks import SinkAttention, SlidingWindowSinkAttention
from literate.parts.window import layer_window
from literate.tools.syncs import host_reads

from harness import (
    NO_SPECIAL_TOKENS,
    assert_float64_equal,
    hf_norms_in_input_dtype,
    hf_sizes,
)

F64 = torch.float64
F32_OUTPUTS = 16 * 2.0**-23  # logits, router logits, losses
F32_GRADIENTS = 256 * 2.0**-23  # parameter gradients
F32_ALL_OUTPUTS = 32 * 2.0**-23  # logits, router logits, both models in float32
F64_TOL = 1e-12
VOCAB, D, H, H_KV, D_HEAD, D_FF, E, K, W, B, T = 61, 32, 4, 2, 8, 16, 4, 2, 4, 2, 9
KINDS = ["sliding_attention", "full_attention", "sliding_attention"]


def hf_config(**changes) -> GptOssConfig:
    settings = hf_sizes(VOCAB, D, H, H_KV, D_FF, 3) | {
        "head_dim": D_HEAD,
        "num_local_experts": E,
        "num_experts_per_tok": K,
        "sliding_window": W,
        "layer_types": KINDS,
        "max_position_embeddings": 131_072,
        "router_aux_loss_coef": 0.001,
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "eager",
        "experts_implementation": "eager",
    }
    return GptOssConfig(**(settings | changes))  # rope_parameters: HF's YaRN


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    theirs = GptOssForCausalLM(hf_config()).double().eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if name.endswith("sinks"):
                p.normal_(0.0, 2.0)  # sinks that take a real share
            elif name.endswith("norm.weight") or "layernorm" in name:
                p.normal_(1.0, 0.3)
            elif "router" in name:
                p.normal_(0.0, 0.5)  # routing far from uniform
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)  # HF initialises these to 0
            else:
                p.normal_(0.0, 0.2)
    ours = gpt_oss_from_hf_config(theirs.config).double().eval()
    load_hf_gpt_oss(ours, theirs.state_dict(), theirs.config)
    return ours, theirs


def test_built_from_the_config(pair):
    ours, theirs = pair
    kinds = [type(b.attn) for b in ours.blocks]
    assert kinds == [
        SlidingWindowSinkAttention,
        SinkAttention,
        SlidingWindowSinkAttention,
    ]
    assert [layer_window(b.attn) for b in ours.blocks] == [W, None, W]
    rope = ours.blocks[0].attn.rope
    assert isinstance(rope, YarnRotaryEmbedding) and rope.yarn["factor"] == 32.0
    assert rope.yarn["truncate"] is False and abs(rope.attention_factor - 1.3466) < 1e-4
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() for p in theirs.parameters()
    )


def forward_and_grads(ours, theirs):
    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(1))
    got = ours(ids)
    out = theirs(ids, output_router_logits=True)
    want = out.logits
    probe = torch.randn(
        got.shape, generator=torch.Generator().manual_seed(2), dtype=got.dtype
    )
    names = [n for n, _ in ours.named_parameters()]
    hf = dict(theirs.named_parameters())
    hf_names = [n for n, _ in theirs.named_parameters()]
    assert len(names) == len(hf_names)
    ours_params = dict(ours.named_parameters())
    loss_ours, loss_hf = (got * probe).sum(), (want * probe).sum()
    g_ours = torch.autograd.grad(loss_ours, list(ours_params.values()))
    g_hf = dict(zip(hf_names, torch.autograd.grad(loss_hf, list(hf.values()))))
    ours_of = {}
    for n in hf_names:
        key = n
        for pattern, replacement in HF_GPT_OSS_NAMES:
            key = re.sub(pattern, replacement, key)
        ours_of[key] = n
    routers = [f"router_logits[{i}]" for i in range(len(ours.blocks))]
    labels = ["logits", *routers, *names]
    mine = [got, *(b.ffn.router_logits for b in ours.blocks), *g_ours]
    theirs_t = [want, *out.router_logits, *(g_hf[ours_of[n]] for n in names)]
    return labels, mine, theirs_t


def test_tiny_gpt_oss_equals_hf(pair):
    ours, theirs = pair
    labels, mine, hf = forward_and_grads(ours, theirs)
    diffs = {n: (a - b).abs().max().item() for n, a, b in zip(labels, mine, hf)}
    for n, a, b in zip(labels, mine, hf):
        bound = (
            F32_OUTPUTS if n == "logits" or n.startswith("router") else F32_GRADIENTS
        )
        assert diffs[n] <= bound * b.abs().max().item(), (n, diffs[n])
    assert max(diffs.values()) > 1e-12  # HF's float32 norms are in the path
    with hf_norms_in_input_dtype(theirs, modeling_gpt_oss):
        labels, mine, hf = forward_and_grads(ours, theirs)
    assert_float64_equal(labels, mine, hf, F64_TOL)
    sinks = [n for n in labels if n.endswith("sinks")]
    assert len(sinks) == 3 and all(
        mine[labels.index(n)].abs().max() > 1e-3 for n in sinks
    )


@pytest.mark.skipif(
    not hasattr(torch.nn.functional, "grouped_mm"),
    reason="this torch has no F.grouped_mm: only the padded path",
)
def test_tiny_gpt_oss_in_float32_through_the_grouped_path_equals_hf(pair, monkeypatch):
    """Both models in float32: ours runs `GptOssExperts.grouped` in each of the 3
    layers (spied on; the padded `forward` would fail the test), HF its eager experts.
    Logits, router logits and every gradient within the float32 bounds above."""
    theirs = GptOssForCausalLM(pair[1].config).float().eval()
    theirs.load_state_dict(pair[1].state_dict())  # the float64 weights, rounded
    ours = gpt_oss_from_hf_config(theirs.config).float().eval()
    load_hf_gpt_oss(ours, theirs.state_dict(), theirs.config)
    calls = []
    grouped = GptOssExperts.grouped

    def spy(self, rows, offs):
        calls.append(rows.shape)
        return grouped(self, rows, offs)

    monkeypatch.setattr(GptOssExperts, "grouped", spy)
    monkeypatch.setattr(
        GptOssExperts, "forward", lambda *a: pytest.fail("the padded path ran")
    )
    labels, mine, hf = forward_and_grads(ours, theirs)
    assert calls == [(B * T * K, D)] * 3
    assert all(a.dtype == torch.float32 for a in mine)
    for n, a, b in zip(labels, mine, hf):
        bound = (
            F32_ALL_OUTPUTS
            if n == "logits" or n.startswith("router")
            else F32_GRADIENTS
        )
        diff = (a - b).abs().max().item()
        assert diff <= bound * b.abs().max().item(), (n, diff)


def test_balancing_loss_and_training_loss_equal_hf(pair):
    """HF's aux_loss accumulates in float32 (and its cross-entropy upcasts the logits):
    within F32_OUTPUTS of ours; loss = CE + router_aux_loss_coef * aux."""
    ours, theirs = pair
    ids = torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        out = theirs(input_ids=ids, labels=ids, output_router_logits=True)
        logits = ours(ids)
        aux = gpt_oss_aux_loss(ours)
        ce = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1)
        )
        loss = ce + theirs.config.router_aux_loss_coef * aux
    assert aux > K  # uniform routing gives k: ours is not uniform
    for name, a, b in (("aux", aux, out.aux_loss), ("loss", loss, out.loss)):
        assert abs(a.item() - b.item()) <= F32_OUTPUTS * abs(b.item()), name


def test_greedy_cached_decoding_past_the_window_equals_hf_generate(pair):
    ours, theirs = pair
    prompt = torch.randint(0, VOCAB, (B, 5), generator=torch.Generator().manual_seed(3))
    with hf_norms_in_input_dtype(theirs, modeling_gpt_oss):
        want = theirs.generate(
            prompt, max_new_tokens=10, do_sample=False, min_new_tokens=10
        )
    got = generate(ours, prompt, 10)
    assert got.shape == (B, 15) and torch.equal(got, want)
    assert len(set(got[:, 5:].flatten().tolist())) > 2  # not one token repeated


def test_no_host_reads_in_run(pair):
    ours, _ = pair
    ids = torch.randint(0, VOCAB, (B, T))
    assert host_reads(ours.run, ids) == 0


def test_refusals_name_the_field(pair):
    ours, theirs = pair
    bad = [
        ({"attention_dropout": 0.1}, "attention_dropout"),
        (
            {
                "layer_types": [
                    "sliding_attention",
                    "chunked_attention",
                    "full_attention",
                ]
            },
            "layer_types",
        ),
        (
            {
                "rope_parameters": {
                    "rope_type": "linear",
                    "rope_theta": 1e4,
                    "factor": 2.0,
                }
            },
            "rope_type",
        ),
    ]
    base = theirs.config.to_dict()
    for change, field in bad:
        with pytest.raises(ValueError, match=field):
            gpt_oss_from_hf_config(base | change)
    with pytest.raises(ValueError, match="sliding_window"):
        gpt_oss_from_hf_config(base | {"sliding_window": None})
    for change, field in [
        ({"num_experts_per_tok": 1}, "num_experts_per_tok"),
        ({"swiglu_limit": 6.0}, "swiglu_limit"),
        ({"layer_types": KINDS[::-1][:2] + ["full_attention"]}, "layer_types"),
        (
            {"rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}},
            "rope_parameters",
        ),
    ]:
        with pytest.raises(ValueError, match=field):
            check_gpt_oss_config(ours, base | change)
