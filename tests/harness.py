"""What the comparisons with Hugging Face share: tolerances, HF's additive causal mask,
and the patch that makes HF's float32 steps run in the input dtype.

Tolerances. In float64 both sides compute the same formula to ~1e-15 relative: a test
states its own F64 tolerance (1e-12 or 1e-10 for deeper stacks). Where Hugging Face
computes in float32 whatever the input (its RMSNorms upcast and its eager softmax is
`dtype=torch.float32`), the difference is float32 rounding: `F32_BOUND` ulps of float32
(2**-23) times the largest entry compared, 16 for a block or two (a few float32 steps
in a row), more for deeper stacks (each test says why). `assert_float32_limited`
checks that bound and also that the float32 steps are really in the path (a difference
above 1e-12): a comparison that passes only because both sides ran float64 would prove
nothing about HF's float32 path. `assert_float64_equal` checks a test's own float64
tolerance, and `assert_equal_to_hf` makes both checks of one comparison: HF as it is, then
HF patched to compute in the input dtype (`hf_in_input_dtype`, `hf_norms_in_input_dtype`).

What is compared. `compare_grads` (two modules on one seeded input) and `hf_model_grads`
(a language model against HF's, on the given tokens) return (labels, ours, theirs): the
output, then the gradient of sum(output * probe), a fixed random probe, with respect to
the input and to every parameter, matched by name. The tiny HF models and configs the
equivalence tests build share their recipe here too (`random_gains_hf_model`,
`randomise_`, `hf_sizes`, `tiny_deepseek_v3_config`, `gpt_oss_attention_config`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import torch
from torch import Tensor

from literate.parts.attention import causal_allowed

F32_BOUND = 16 * 2.0**-23  # times the largest |entry| of the tensor compared


def assert_float32_limited(
    labels: Sequence[str],
    ours: Sequence[Tensor],
    theirs: Sequence[Tensor],
    *,
    bound: float = F32_BOUND,
) -> float:
    """Each pair differs by at most `bound` times the reference's largest |entry|, and
    the largest difference is above float64 rounding. Returns that largest difference."""
    diffs = {}
    for name, a, b in zip(labels, ours, theirs, strict=True):
        diffs[name] = diff = (a - b).abs().max().item()
        limit = bound * b.abs().max().item()
        assert diff <= limit, f"{name}: max |diff| {diff:.3g} > {limit:.3g}"
    assert max(diffs.values()) > 1e-12  # HF's float32 steps are really in the path
    return max(diffs.values())


def hf_causal_mask(t: int) -> Tensor:
    """An eager HF attention with attention_mask=None attends everywhere: the causal
    mask in HF's additive form (0 = may attend, -inf = blocked), [1, 1, T, T]."""
    blocked = ~causal_allowed(t, t)
    return torch.zeros(t, t, dtype=torch.float64).masked_fill(blocked, -math.inf)[
        None, None
    ]


@contextlib.contextmanager
def hf_norms_in_input_dtype(
    module: torch.nn.Module,
    modeling: ModuleType,
    formula: Callable[[torch.nn.Module, Tensor], Tensor] | None = None,
) -> Iterator[None]:
    """Test-harness patch: every RMSNorm of `modeling` (an HF modeling module, e.g.
    `transformers.models.llama.modeling_llama`) inside `module` computes its own formula
    in the input dtype (HF: float32): `formula(norm, x)`, by default Llama's
    weight * x / sqrt(mean(x^2) + eps). A ValueError if `module` holds none. Undone on
    exit."""
    norms = [
        m
        for m in module.modules()
        if type(m).__module__ == modeling.__name__
        and type(m).__name__.endswith("RMSNorm")
    ]
    if not norms:
        raise ValueError(f"no RMSNorm of {modeling.__name__} in the module")
    for m in norms:

        def forward(x, m=m):
            if formula is not None:
                return formula(m, x)
            return m.weight * (
                x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon)
            )

        m.forward = forward
    try:
        yield
    finally:
        for m in norms:
            del m.forward


@contextlib.contextmanager
def hf_in_input_dtype(module: torch.nn.Module, modeling: ModuleType) -> Iterator[None]:
    """Test-harness patch: `hf_norms_in_input_dtype`, and `modeling`'s eager attention
    takes its softmax in the input dtype (HF: float32). Undone on exit."""
    eager = modeling.eager_attention_forward

    def eager_in_input_dtype(
        module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs
    ):
        key = modeling.repeat_kv(key, module.num_key_value_groups)
        value = modeling.repeat_kv(value, module.num_key_value_groups)
        scores = query @ key.transpose(2, 3) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = scores.softmax(dim=-1)  # HF: softmax(..., dtype=torch.float32)
        return (weights @ value).transpose(1, 2).contiguous(), weights

    with hf_norms_in_input_dtype(module, modeling):
        modeling.eager_attention_forward = eager_in_input_dtype
        try:
            yield
        finally:
            modeling.eager_attention_forward = eager


def assert_float64_equal(
    labels: Sequence[str], ours: Sequence[Tensor], theirs: Sequence[Tensor], tol: float
) -> float:
    """Each pair differs by at most `tol` (absolute: the test's float64 tolerance); the
    message names the worst. Returns the largest difference."""
    diffs = {
        n: (a - b).abs().max().item()
        for n, a, b in zip(labels, ours, theirs, strict=True)
    }
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] <= tol, f"{worst}: max |diff| {diffs[worst]:.3g}"
    return diffs[worst]


def assert_equal_to_hf(
    compared: Callable[[], tuple[list[str], list[Tensor], list[Tensor]]],
    patched: contextlib.AbstractContextManager,
    *,
    tol: float,
    bound: float = F32_BOUND,
) -> None:
    """Both checks of one comparison with HF. `compared()` gives (labels, ours, theirs)
    and is called twice: with HF as it is, `assert_float32_limited` within `bound` (and
    above float64 rounding); inside `patched` (HF computing in the input dtype, e.g.
    `hf_in_input_dtype(theirs, modeling)`), `assert_float64_equal` within `tol`."""
    assert_float32_limited(*compared(), bound=bound)
    with patched:
        assert_float64_equal(*compared(), tol=tol)


# --- what is compared -------------------------------------------------------------------


def input_and_probe(*shape: int, seed: int = 1) -> tuple[Tensor, Tensor]:
    """(x, probe): float64 N(0, 1) of `shape` from one generator seeded `seed`, x first
    (requiring grad), then the probe the output is multiplied by."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)
    return x, torch.randn(*shape, generator=g, dtype=torch.float64)


def output_and_grads(module, run, names, x, probe) -> list[Tensor]:
    """[output, d x, d each parameter of `module` named] of sum(run(x) * probe)."""
    out = run(x)
    wrt = [x, *(module.get_parameter(n) for n in names)]
    return [out, *torch.autograd.grad((out * probe).sum(), wrt)]


def compare_grads(
    ours: torch.nn.Module,
    run_ours: Callable[[Tensor], Tensor],
    theirs: torch.nn.Module,
    run_theirs: Callable[[Tensor], Tensor],
    rename: Callable[[str], str] = lambda n: n,
    *,
    shape: Sequence[int],
    seed: int = 1,
) -> tuple[list[str], list[Tensor], list[Tensor]]:
    """(labels, ours, theirs): the output of `run_ours(x)` and `run_theirs(x)` on the same
    x (`input_and_probe(*shape, seed=seed)`), and the gradients of the input and of every
    parameter of `ours`, each against `theirs`'s parameter named `rename(name)`."""
    names = [n for n, _ in ours.named_parameters()]
    x, probe = input_and_probe(*shape, seed=seed)
    got = output_and_grads(ours, run_ours, names, x, probe)
    want = output_and_grads(theirs, run_theirs, [rename(n) for n in names], x, probe)
    return ["output", "x", *names], got, want


def hf_model_grads(
    ours: torch.nn.Module,
    theirs: torch.nn.Module,
    tokens: Tensor,
    our_name: Callable[[str], str],
) -> tuple[list[str], list[Tensor], list[Tensor]]:
    """(labels, ours, theirs): the logits of `ours(tokens)` and of the HF model
    `theirs(input_ids=tokens)`, and the gradient of sum(logits * probe) (float64 probe,
    seed 3) w.r.t. every parameter of HF's (a tied tensor once), each against ours named
    `our_name(hf_name)`."""
    got, want = ours(tokens), theirs(input_ids=tokens).logits
    probe = torch.randn(
        got.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    names = [n for n, _ in theirs.named_parameters()]
    mine = dict(ours.named_parameters())
    g_ref = torch.autograd.grad(
        (want * probe).sum(), [theirs.get_parameter(n) for n in names]
    )
    g_ours = torch.autograd.grad(
        (got * probe).sum(), [mine[our_name(n)] for n in names]
    )
    return ["logits", *names], [got, *g_ours], [want, *g_ref]


LLAMA_LAYER_NAMES = {  # our Llama-style block's parts: HF's decoder layer's
    "attn": "self_attn",
    "ffn": "mlp",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def hf_layer_name(ours: str) -> str:
    """Our Llama-style block's parameter name -> HF's decoder layer's (LlamaDecoderLayer,
    MistralDecoderLayer): "attn.q_proj.weight" -> "self_attn.q_proj.weight"."""
    first, rest = ours.split(".", 1)
    return f"{LLAMA_LAYER_NAMES[first]}.{rest}"


def hf_renamer(table: Sequence[tuple[str, str]]) -> Callable[[str], str]:
    """HF's parameter name -> ours: each (pattern, replacement) of `table` (a library's
    HF_*_NAMES) applied in turn with re.sub."""

    def our_name(hf: str) -> str:
        for pattern, replacement in table:
            hf = re.sub(pattern, replacement, hf)
        return hf

    return our_name


def hf_greedy(
    model: torch.nn.Module, prompt: Tensor, n: int, valid: Tensor | None = None
) -> Tensor:
    """Hugging Face's `generate`, greedy, `n` new tokens after `prompt` [B, T0]; `valid`
    [B, T0] marks a left-padded batch's real tokens (pad id 0), None: no padding."""
    mask = torch.ones_like(prompt) if valid is None else valid.long()
    pad = {} if valid is None else {"pad_token_id": 0}
    with torch.no_grad():
        return model.generate(
            prompt, attention_mask=mask, max_new_tokens=n, do_sample=False, **pad
        )


def random_tokens(vocab: int, b: int, t: int, seed: int) -> Tensor:
    """[b, t] token ids uniform in [0, vocab), from a generator seeded `seed`."""
    return torch.randint(
        0, vocab, (b, t), generator=torch.Generator().manual_seed(seed)
    )


# --- the tiny models --------------------------------------------------------------------


def random_gains_hf_model(
    model_class, config, *, seed: int = 0, gain_mean: float = 1.0
) -> torch.nn.Module:
    """`model_class(config)` built after torch.manual_seed(seed), float64, in eval mode,
    every 1-d parameter (the norms' gains) ~ N(gain_mean, 0.3^2), drawn in order from
    the global generator: HF initialises the gains to a constant, where a swapped or
    missing one would not show."""
    torch.manual_seed(seed)
    model = model_class(config).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.normal_(gain_mean, 0.3)
    return model


def randomise_(
    module: torch.nn.Module, seed: int, scale: float = 0.3
) -> torch.nn.Module:
    """In place, from a generator seeded `seed`, in parameter order: gains ~ N(1, 0.09),
    biases ~ N(0, 0.09), sinks ~ N(0, 4) (shares far from 0 and 1), matrices ~ N(0,
    scale^2): a swapped or misplaced part shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if name == "sinks":
                p.copy_(2.0 * noise)
            elif name.endswith("bias"):
                p.copy_(0.3 * noise)
            elif p.ndim == 1:
                p.copy_(1 + 0.3 * noise)
            else:
                p.copy_(scale * noise)
    return module


NO_SPECIAL_TOKENS = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def hf_sizes(vocab: int, d: int, heads: int, kv_heads: int, d_ff: int, layers: int):
    """A decoder's sizes under HF's config field names (Llama, Mistral, Mixtral, ...)."""
    return {
        "vocab_size": vocab,
        "hidden_size": d,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": d_ff,
        "num_hidden_layers": layers,
    }


def latent_dims(r_q: int | None, r_kv: int, d_nope: int, d_rope: int, d_v: int):
    """Multi-head latent attention's ranks and head sizes under the names HF's
    DeepseekV3Config, our layers and `mla_params` all take."""
    return {
        "q_lora_rank": r_q,
        "kv_lora_rank": r_kv,
        "qk_nope_head_dim": d_nope,
        "qk_rope_head_dim": d_rope,
        "v_head_dim": d_v,
    }


def tiny_deepseek_v3_config(**changes):
    """A DeepseekV3Config in small (`changes` replace any field): vocabulary 61, width
    32, 4 heads, latent ranks 24 (queries) and 16 (keys and values), head sizes 10 + 6
    (RoPE) and 12 (values); 2 layers, a dense one (d_ff 48), then a mixture of experts
    (8 routed of d_ff 16 in 4 groups, top 2 of 2 groups, one shared); default RoPE
    (base 10,000), eps 1e-5, no special tokens, sdpa and eager experts (grouped_mm has
    no float64)."""
    from transformers import DeepseekV3Config

    settings = {
        "vocab_size": 61,
        "hidden_size": 32,
        "intermediate_size": 48,
        "moe_intermediate_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_shared_experts": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 4,
        "topk_group": 2,
        "first_k_dense_replace": 1,
        "routed_scaling_factor": 2.5,
        **latent_dims(24, 16, 10, 6, 12),
        "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5,
        "initializer_range": 0.2,
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
        **NO_SPECIAL_TOKENS,
        "attn_implementation": "sdpa",
        "experts_implementation": "eager",
    }
    return DeepseekV3Config(**(settings | changes))


GPT_OSS_YARN = {  # gpt-oss's released RoPE
    "rope_type": "yarn",
    "rope_theta": 150_000.0,
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}


def gpt_oss_attention_config(rope_parameters: dict):
    """A GptOssConfig for its attention layers: width 32, 4 heads, 2 key/value heads of
    8, layer 0 sliding (window 4), layer 1 full, eager attention (its softmax with the
    sinks runs in the input dtype); the rest (vocabulary 16, 2 experts) as small as
    HF allows."""
    from transformers import GptOssConfig

    return GptOssConfig(
        vocab_size=16,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_hidden_layers=2,
        intermediate_size=8,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters=rope_parameters,
        max_position_embeddings=131_072,
        attn_implementation="eager",
    )


def gpt2_settings(d: int, heads: int, layers: int, context: int, vocab: int) -> dict:
    """GPT2Config's fields for a small GPT-2 of these sizes: no dropout, GPT-2's
    activation ("gelu_new"), no special token ids."""
    return {
        "n_embd": d,
        "n_head": heads,
        "n_layer": layers,
        "n_positions": context,
        "vocab_size": vocab,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "activation_function": "gelu_new",
        "bos_token_id": None,
        "eos_token_id": None,
    }


# --- the 2017 Transformer ---------------------------------------------------------------

# Token ids a tiny 2017 model (vocabulary 11, max_length 12, PAD 0) refuses as a source,
# each with the error and the message naming it: (tokens, error class, message regex).
BAD_SOURCE_IDS = [
    ([[3, 4]], TypeError, r"^source must hold token ids as torch\.long, got list$"),
    (
        torch.tensor([[3.0, 4.0]]),
        TypeError,
        r"^source must hold token ids as torch\.long, got torch\.float32$",
    ),
    (
        torch.tensor([[3, 4]], dtype=torch.int32),
        TypeError,
        r"^source must hold token ids as torch\.long, got torch\.int32$",
    ),
    (
        torch.tensor([3, 4]),
        ValueError,
        r"^source must have shape \[B, T\], B, T >= 1, got \(2,\)$",
    ),
    (
        torch.zeros(2, 0, dtype=torch.long),
        ValueError,
        r"^source must have shape \[B, T\], B, T >= 1, got \(2, 0\)$",
    ),
    (torch.full((1, 13), 3), ValueError, r"^source has 13 tokens > max_length=12$"),
    (
        torch.tensor([[3, 11]]),
        ValueError,
        r"^source\[0, 1\] = 11 is outside the vocabulary \[0, 11\)$",
    ),
    (
        torch.tensor([[3, 4], [5, -1]]),
        ValueError,
        r"^source\[1, 1\] = -1 is outside the vocabulary \[0, 11\)$",
    ),
    (
        torch.tensor([[3, 4], [0, 0]]),
        ValueError,
        r"^source row 1 is nothing but PAD=0$",
    ),
]


# One intra-op thread in the interpreters started by the tests, as conftest.py sets it
# for the tests: side by side on 2 busy cores, OpenMP threads woken per tiny op crawl.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_in_fresh_interpreters(
    jobs: list[dict], folder: Path
) -> dict[str, subprocess.CompletedProcess]:
    """Each job ({"name", "code", "argv", "cwd"}) run as `python -c code *argv` in an
    interpreter that has imported nothing but torch (`fresh_interpreters.py`, all at
    once), by name: its exit code, standard output and error."""
    (folder / "jobs.json").write_text(json.dumps(jobs), encoding="utf-8")
    runner = Path(__file__).with_name("fresh_interpreters.py")
    started = subprocess.run(
        [sys.executable, "-I", str(runner), str(folder / "jobs.json")],
        cwd=folder,
        env=ONE_THREAD,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    codes = json.loads((folder / "codes.json").read_text(encoding="utf-8"))
    return {
        job["name"]: subprocess.CompletedProcess(
            job["argv"],
            codes[job["name"]],
            (folder / f"{job['name']}.out").read_text(encoding="utf-8"),
            (folder / f"{job['name']}.err").read_text(encoding="utf-8"),
        )
        for job in jobs
    }
