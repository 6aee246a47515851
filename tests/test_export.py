"""One verified file per era (`python -m literate.tools.export`).

Each exported file is run in an interpreter of its own that has imported nothing but
torch (`fresh_interpreters.py`), from an empty directory (its self-check must pass and it
must import nothing from `literate`), and then imported here and compared with the
production layers it mirrors: PyTorch's attention and Transformer layers, and Hugging
Face's GPT-2 (logits and greedy tokens), in float64 where the reference allows it, at
1e-12 (differences are rounding of the same float64 operations in another order: ~1e-15
is what is measured). The Mixtral and long-context files are compared with Hugging Face
in interpreters of their own, where their grouped_mm custom ops are the only ones
(`mixtral_against_hf` says why).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from literate.site.docblocks import ROOT
from literate.tools.export import ERAS, assemble, main, section_source, used_sections

from harness import F32_BOUND, run_in_fresh_interpreters

F64 = torch.float64
INCLUDE = re.compile(
    r'--8<-- "literate/(?P<module>[a-z_0-9/]+)\.py:(?P<section>[a-z][-_0-9a-z]*)"'
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("eras")
    paths = {}
    for name in ERAS:
        paths[name] = out / f"{name}.py"
        paths[name].write_text(assemble(name), encoding="utf-8")
    return paths


def load(path: Path):
    name = f"exported_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


HF_COMPARISONS = {
    "mixtral": "mixtral_against_hf",
    "long_context": "long_context_against_hf",
}


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every era file run, and the files of HF_COMPARISONS compared with Hugging Face,
    each in an interpreter of its own that has imported nothing but torch, from an
    empty directory (`fresh_interpreters.py` forks them all at once from one isolated
    interpreter that imported torch: most of an interpreter's start is that import)."""
    probe = (
        "import runpy, sys\n"
        "runpy.run_path(sys.argv.pop(1), run_name='__main__')  # argv: as python FILE\n"
        "leaked = sorted(m for m in sys.modules if m == 'literate' or m.startswith('literate.'))\n"
        "sys.exit(f'imported {leaked}' if leaked else 0)\n"
    )
    jobs = [
        {
            "name": name,
            "code": probe,
            "argv": [str(path)],
            "cwd": str(tmp_path_factory.mktemp(f"run_{name}")),
        }
        for name, path in files.items()
    ]
    for era, function in HF_COMPARISONS.items():
        code = (
            "import json, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            f"from test_export import {function}\n"
            f"print(json.dumps({function}(sys.argv[2])))\n"
        )
        jobs.append(
            {
                "name": f"{era}_vs_hf",
                "code": code,
                "argv": [str(Path(__file__).parent), str(files[era])],
                "cwd": str(tmp_path_factory.mktemp(f"hf_{era}")),
            }
        )
    return run_in_fresh_interpreters(jobs, tmp_path_factory.mktemp("jobs"))


@pytest.mark.parametrize("name", sorted(ERAS))
def test_the_file_runs_alone_and_imports_nothing_from_literate(name, runs):
    run = runs[name]
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{name}.py: self-check passed" in run.stdout


@pytest.mark.parametrize("name", sorted(ERAS))
def test_every_section_of_an_era_is_shown_on_a_page(name):
    shown = set()
    for page in (ROOT / "docs").rglob("*.md"):
        shown |= {
            (m["module"].replace("/", "."), m["section"])
            for m in INCLUDE.finditer(page.read_text(encoding="utf-8"))
        }
    # the self-check's own helpers are the file's test, not code a page teaches
    missing = [
        s for s in ERAS[name].sections if s not in shown and s[0] != "tools.selfcheck"
    ]
    assert not missing, f"{name} exports sections no page shows: {missing}"


@pytest.mark.parametrize("name", sorted(ERAS))
def test_every_era_names_the_production_classes_its_test_compares_with(name):
    """`Era.equals` (what chapter 11's downloads list says each file is proven equal
    to): each a class that imports, named in this file's test of that era (or the
    function that test runs in its own interpreter)."""
    import ast
    import importlib

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    functions = {
        node.name: ast.get_source_segment(
            Path(__file__).read_text(encoding="utf-8"), node
        )
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }
    sources = "\n".join(
        source
        for fn, source in functions.items()
        if fn.startswith(f"test_{name}_file_equals") or fn == f"{name}_against_hf"
    )
    assert ERAS[name].equals and sources, name
    for dotted in ERAS[name].equals:
        module, _, cls = dotted.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), cls), type), dotted
        assert re.search(rf"\b{cls}\b", sources), f"{name}: {cls} is not compared"


def test_assembled_files_are_deterministic_and_start_with_their_story(files):
    for name in ERAS:
        text = assemble(name)
        assert text == files[name].read_text(encoding="utf-8")  # assembled twice
        assert text.startswith('"""') and "from __future__ import annotations" in text
        assert "literate" not in "\n".join(
            l for l in text.splitlines() if l.startswith(("import", "from"))
        )
        long = [line for line in text.splitlines() if len(line) > 88]
        assert not long, f"{name}: lines over 88 characters: {long[:3]}"


def test_a_file_holds_only_what_its_era_uses(files):
    """Chapters 1-3's parts enter a later era's file only where it uses them: the Llama
    file has no sinusoidal table, no host-read counter and no published attention
    sizes; and every section taken from an era's library defines a name the rest of
    the file uses."""
    llama = files["llama"].read_text(encoding="utf-8")
    for absent in (
        "def sinusoidal_table",
        "class HostReads",
        "class PublishedAttention",
        "def pack_qkv",
    ):
        assert absent not in llama, absent
    assert "def sinusoidal_table" in files["transformer2017"].read_text(
        encoding="utf-8"
    )
    for name, era in ERAS.items():
        chosen = used_sections(era)
        for section in chosen:
            if section not in era.library:
                continue
            others = "\n".join(section_source(*s) for s in chosen if s != section)
            defined = re.findall(
                r"^(?:def|class) (\w+)|^(\w+)\s*[:=]", section_source(*section), re.M
            )
            names = {a or b for a, b in defined}
            assert any(re.search(rf"\b{n}\b", others) for n in names), (name, section)


def test_cli_lists_writes_and_refuses_an_unknown_era(tmp_path, capsys):
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ERAS)
    out = tmp_path / "gpt2.py"
    assert main(["gpt2", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == assemble("gpt2")
    with pytest.raises(SystemExit):
        main(["gpt3"])
    with pytest.raises(KeyError, match="no section 'nope'"):
        section_source("parts.attention", "nope")
    with pytest.raises(KeyError, match="no module literate.attention"):
        section_source("attention", "causal_allowed")


def test_attention_file_equals_pytorch(files):
    era = load(files["attention"])
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True, dtype=F64)
    ours = era.MultiHeadAttention(16, 4, bias=True).double()
    with torch.no_grad():
        era.load_packed_qkv(ours, theirs.in_proj_weight, theirs.in_proj_bias)
        ours.o_proj.weight.copy_(theirs.out_proj.weight)
        ours.o_proj.bias.copy_(theirs.out_proj.bias)
    x = torch.randn(3, 6, 16, dtype=F64, requires_grad=True)
    valid = torch.tensor(
        [[True] * 6, [True] * 4 + [False] * 2, [True] * 2 + [False] * 4]
    )
    mask = era.causal_allowed(6, 6)
    a = ours(x, causal=True, key_valid=valid)
    b = theirs(x, x, x, key_padding_mask=~valid, attn_mask=~mask, need_weights=False)[0]
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    ga = torch.autograd.grad(a.square().sum(), [x, *ours.parameters()])
    gb = torch.autograd.grad(b.square().sum(), [x, *theirs.parameters()])
    torch.testing.assert_close(ga[0], gb[0], atol=1e-12, rtol=0)


def test_transformer2017_file_equals_pytorch_layers(files):
    era = load(files["transformer2017"])
    torch.manual_seed(0)
    model = (
        era.EncoderDecoder(11, 16, 2, 32, 2, dropout=0.0, max_length=12).double().eval()
    )
    source = torch.tensor([[3, 4, 5, 2, 0], [6, 7, 2, 0, 0]])
    targets = torch.tensor([[5, 4, 3, 2], [7, 6, 2, 0]])
    encoder = nn.TransformerEncoder(
        era.torch_encoder_layer(model.encoder[0]), 2, enable_nested_tensor=False
    )
    encoder.layers[1] = era.torch_encoder_layer(model.encoder[1])
    decoder = nn.TransformerDecoder(era.torch_decoder_layer(model.decoder[0]), 2)
    decoder.layers[1] = era.torch_decoder_layer(model.decoder[1])
    with torch.no_grad():
        pad = source == model.pad_id
        memory = encoder(model.embed(source), src_key_padding_mask=pad)
        y = model.embed(era.shift_right(targets, model.bos_id))
        causal = ~era.causal_allowed(4, 4)
        hidden = decoder(
            y,
            memory,
            tgt_mask=causal,
            memory_key_padding_mask=pad,
            tgt_key_padding_mask=era.shift_right(targets, model.bos_id) == model.pad_id,
        )
        torch.testing.assert_close(
            model(source, targets), model.logits(hidden), atol=1e-12, rtol=0
        )


def test_gpt2_file_equals_hugging_face(files):
    import transformers

    era = load(files["gpt2"])
    config = transformers.GPT2Config(
        vocab_size=61,
        n_positions=16,
        n_embd=32,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    theirs = transformers.GPT2LMHeadModel(config).double().eval()
    ours = era.gpt2_from_hf_config(config).double().eval()
    era.load_hf_gpt2(ours, theirs.state_dict(), config)
    ids = torch.randint(1, 61, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(ids).logits, atol=1e-12, rtol=0)
    expected = theirs.generate(
        ids[:, :3], max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    assert torch.equal(ours.generate(ids[:, :3], 6), expected)
    cached_and_beam_equal_hugging_face(era, ours, theirs, era.load_hf_gpt2)


def cached_and_beam_equal_hugging_face(era, ours, theirs, load_hf):
    """The file's cached `generate` on a left-padded batch and its `beam_generate` give
    HF `generate`'s tokens (greedy with attention_mask, and num_beams=3), and the beam
    scores to float32 rounding (HF scores in float32). `load_hf`: the era's loader."""
    torch.manual_seed(1)
    with torch.no_grad():  # larger weights: continuations that vary
        for p in theirs.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.3)
    load_hf(ours, theirs.state_dict(), theirs.config)
    ids = torch.randint(1, 61, (3, 5))
    mask = torch.tensor([[1] * 5, [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]])
    hf = dict(
        attention_mask=mask,
        max_new_tokens=6,
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
    )
    tokens = era.generate(ours, ids, 6, valid=mask.bool())
    assert torch.equal(tokens, theirs.generate(ids, **hf))
    assert len(set(tokens[:, 5:].flatten().tolist())) >= 6  # not one repeated token
    beams = theirs.generate(
        ids,
        num_beams=3,
        length_penalty=0.6,
        output_scores=True,
        return_dict_in_generate=True,
        **hf,
    )
    sequences, scores = era.beam_generate(
        ours, ids, 3, 6, valid=mask.bool(), length_penalty=0.6
    )
    assert torch.equal(sequences, beams.sequences)
    assert (
        scores - beams.sequences_scores
    ).abs().max() < 16 * 2.0**-23 * scores.abs().max()


def test_llama_file_equals_hugging_face(files):
    """The exported Llama against `LlamaForCausalLM` (float64, every gain random): logits
    within 16 float32 units of their largest entry as HF computes them (its RMSNorm
    works in float32), within 1e-12 with its norms computing in float64, and the same
    greedy tokens as HF's generate."""
    import transformers

    era = load(files["llama"])
    config = transformers.LlamaConfig(
        vocab_size=61,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=88,
        num_hidden_layers=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    theirs = transformers.LlamaForCausalLM(config).double().eval()
    with torch.no_grad():
        for p in theirs.parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)
    ours = era.llama_from_hf_config(config).double().eval()
    era.load_hf_llama(ours, theirs.state_dict(), config)
    ids = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
        assert 1e-12 < (got - want).abs().max() <= 16 * 2.0**-23 * want.abs().max()
        norms = [m for m in theirs.modules() if type(m).__name__ == "LlamaRMSNorm"]
        for m in norms:  # HF's own formula, in the input's dtype
            m.forward = lambda x, m=m: (
                m.weight
                * x
                * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon)
            )
        try:
            torch.testing.assert_close(got, theirs(ids).logits, atol=1e-12, rtol=0)
        finally:
            for m in norms:
                del m.forward
    expected = theirs.generate(
        ids[:, :3],
        attention_mask=torch.ones_like(ids[:, :3]),
        max_new_tokens=6,
        do_sample=False,
    )
    assert torch.equal(ours.generate(ids[:, :3], 6), expected)
    cached_and_beam_equal_hugging_face(era, ours, theirs, era.load_hf_llama)


@pytest.mark.parametrize("family", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
def test_quick_file_equals_hugging_face(files, family):
    """The quick path's file against `LlamaForCausalLM` and `Qwen3ForCausalLM`
    (float64, every gain random; Qwen3: heads of 16 on a width of 32, QK-norm): logits
    within 16 float32 units of their largest entry as HF computes them (its RMSNorms
    work in float32), within 1e-12 with its norms in float64, every loss gradient
    too, and the same greedy tokens as HF's generate, decoded with the cache."""
    import transformers

    era = load(files["quick"])
    qwen3 = family == "Qwen3ForCausalLM"
    config = getattr(transformers, "Qwen3Config" if qwen3 else "LlamaConfig")(
        vocab_size=61,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        num_hidden_layers=2,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6 if qwen3 else 1e4},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        **({"head_dim": 16} if qwen3 else {}),
    )
    torch.manual_seed(0)
    theirs = getattr(transformers, family)(config).double().eval()
    with torch.no_grad():
        for p in theirs.parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)
    ours = (
        era.LlamaModel(
            vocab_size=61,
            d_model=32,
            n_layers=2,
            n_heads=4,
            n_kv_heads=2,
            d_ff=48,
            d_head=16 if qwen3 else None,
            eps=1e-6,
            qk_norm=qwen3,
            rope_base=config.rope_parameters["rope_theta"],
        )
        .double()
        .eval()
    )
    era.load_hf_llama(ours, theirs.state_dict())
    ids = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
    assert 1e-12 < (got - want).abs().max() <= F32_BOUND * want.abs().max()
    norms = [m for m in theirs.modules() if type(m).__name__.endswith("RMSNorm")]
    assert len(norms) == (2 * 2 + 1) + (2 * 2 if qwen3 else 0)
    for m in norms:  # HF's own formula, in the input's dtype
        m.forward = lambda x, m=m: (
            m.weight
            * x
            * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon)
        )
    try:
        for model, logits in ((ours, ours(ids)), (theirs, theirs(ids).logits)):
            model.zero_grad()
            nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()
            ).backward()
        torch.testing.assert_close(ours(ids), theirs(ids).logits, atol=1e-12, rtol=0)
    finally:
        for m in norms:
            del m.forward
    mine = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        for hf_name, our_name in era.HF_LLAMA_NAMES:
            name = re.sub(hf_name, our_name, name)
        torch.testing.assert_close(mine[name].grad, p.grad, atol=1e-12, rtol=0)
    prompt = ids[:, :4]
    want = theirs.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=8,
        do_sample=False,
    )
    assert torch.equal(era.generate(ours, prompt, max_new_tokens=8), want)
    assert len(set(want[:, 4:].flatten().tolist())) >= 3  # not one repeated token


def worst(labels, ours, theirs) -> dict[str, tuple[float, float]]:
    """label -> (max |ours - theirs|, max |theirs|); a gradient that is None on both
    sides (the tensor does not reach the loss) is left out, on one side only refused."""
    found = {}
    for label, a, b in zip(labels, ours, theirs, strict=True):
        if a is None and b is None:
            continue
        if a is None or b is None:
            raise AssertionError(f"{label}: a gradient on one side only")
        found[label] = ((a - b).abs().max().item(), b.abs().max().item())
    return found


def within(
    found: dict[str, tuple[float, float]], *, ulps: float = 0.0, atol: float = 0.0
) -> float:
    """The largest difference of `found`, each within atol + ulps F32_BOUND of its
    largest entry (AssertionError naming the first that is not)."""
    for label, (diff, size) in found.items():
        bound = atol + ulps * F32_BOUND * size
        if diff > bound:
            raise AssertionError(f"{label}: max |diff| {diff:.3g} > {bound:.3g}")
    return max(diff for diff, _ in found.values())


def mixtral_against_hf(path: str) -> dict[str, float]:
    """The exported Mixtral against `MixtralForCausalLM`. Run by
    test_mixtral_file_equals_hugging_face in an interpreter of its own, as a reader runs
    the file, with none of the library's modules in it (the file's grouped_mm ops are
    named after the module that defines them, so the library's would not clash with
    them; the check below says the library is absent). Raises AssertionError on a
    difference out of bounds; returns the measured worst differences.

    Float64, every gain and the routers random (HF's std 0.02 routes almost
    uniformly), experts "eager" (HF's grouped_mm refuses float64), attention "sdpa"
    (float64 softmax, causal). (1) HF as it is: logits and the gradient of every
    parameter within F32_BOUND (16 float32 units) of their largest entry, and further
    than 1e-12: its RMSNorm computes in float32. (2) HF's norms computing in float64:
    within 1e-12 (the same float64 operations, rounded in another order). (3) The
    balancing loss (output_router_logits=True) and its gradients within F32_BOUND
    either way: HF sums it in float32 buffers. (4) Greedy, cached left-padded and beam
    generate give HF's tokens. (5) float32, both sides on their grouped_mm path (ours:
    dispatch's sorted path, the file's custom op; an older torch without
    F.grouped_mm: both padded/eager): logits and gradients within F32_BOUND (the same
    float32 operations, summed in another order)."""
    import transformers

    if "literate.parts.moe" in sys.modules:
        raise AssertionError("the interpreter must hold the file's grouped_mm ops only")
    era = load(Path(path))
    settings = dict(
        vocab_size=61,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=24,
        num_hidden_layers=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        router_aux_loss_coef=0.02,
        router_jitter_noise=0.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    )
    config = transformers.MixtralConfig(**settings, experts_implementation="eager")
    torch.manual_seed(0)
    theirs = transformers.MixtralForCausalLM(config).double().eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)  # HF initialises gains to 1
            elif name.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.5)
    ours = era.mixtral_from_hf_config(config).double().eval()
    era.load_hf_mixtral(ours, theirs.state_dict(), config)
    names = [n for n, _ in theirs.named_parameters()]
    ids = torch.randint(0, 61, (2, 9))
    probe = torch.randn(2, 9, 61, dtype=F64)

    def our_name(name: str) -> str:
        for pattern, replacement in era.HF_MIXTRAL_NAMES:
            name = re.sub(pattern, replacement, name)
        return name

    def compare(ours, theirs) -> tuple[dict, dict]:
        """(logits and their gradients, the balancing loss and its gradients)."""
        mine = dict(ours.named_parameters())
        wrt = (
            [mine[our_name(n)] for n in names],
            [theirs.get_parameter(n) for n in names],
        )
        got = ours(ids)
        out = theirs(input_ids=ids, output_router_logits=True)
        aux = era.router_aux_loss(ours), out.aux_loss
        grads = [
            torch.autograd.grad(
                (logits * probe.to(logits.dtype)).sum(), params, retain_graph=True
            )
            for logits, params in zip((got, out.logits), wrt)
        ]
        aux_grads = [
            torch.autograd.grad(loss, params, allow_unused=True)
            for loss, params in zip(aux, wrt)
        ]
        return (
            worst(["logits", *names], [got, *grads[0]], [out.logits, *grads[1]]),
            worst(["aux", *names], [aux[0], *aux_grads[0]], [aux[1], *aux_grads[1]]),
        )

    measured = {}
    logits, balance = compare(ours, theirs)
    measured["float64, HF as it is"] = within(logits, ulps=1)
    if measured["float64, HF as it is"] <= 1e-12:
        raise AssertionError("HF's float32 norms are not in the path")
    measured["balancing loss, HF as it is"] = within(balance, ulps=1)
    norms = [m for m in theirs.modules() if type(m).__name__ == "MixtralRMSNorm"]
    for m in norms:  # HF's own formula, in the input's dtype
        m.forward = lambda x, m=m: (
            m.weight
            * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))
        )
    try:
        logits, balance = compare(ours, theirs)
    finally:
        for m in norms:
            del m.forward
    measured["float64, HF's norms in float64"] = within(logits, atol=1e-12)
    measured["balancing loss, HF's norms in float64"] = within(balance, ulps=1)
    if not era.router_aux_loss(ours) > 2:  # uniform routing gives k = 2
        raise AssertionError("the routing is uniform: the loss proves little")

    expected = theirs.generate(
        ids[:, :3],
        attention_mask=torch.ones_like(ids[:, :3]),
        max_new_tokens=6,
        do_sample=False,
    )
    if not torch.equal(ours.generate(ids[:, :3], 6), expected):
        raise AssertionError("generate differs from HF's greedy generate")
    cached_and_beam_equal_hugging_face(era, ours, theirs, era.load_hf_mixtral)

    grouped = hasattr(torch.nn.functional, "grouped_mm")  # torch >= 2.8
    path = "grouped_mm" if grouped else "eager"
    config32 = transformers.MixtralConfig(**settings, experts_implementation=path)
    theirs32 = transformers.MixtralForCausalLM(config32).eval()
    theirs32.load_state_dict(theirs.float().state_dict())
    ours.float()
    if theirs32.config._experts_implementation != path or any(
        b.ffn.experts.takes_grouped(torch.float32) != grouped for b in ours.blocks
    ):
        raise AssertionError(f"float32 must take the {path} path on both sides")
    logits, balance = compare(ours, theirs32)
    measured[f"float32, both on {path}"] = within(logits, ulps=1)
    measured["balancing loss, float32"] = within(balance, ulps=1)
    return measured


def test_mixtral_file_equals_hugging_face(runs):
    """`mixtral_against_hf` in an interpreter of its own, from an empty directory."""
    run = runs["mixtral_vs_hf"]
    assert run.returncode == 0, run.stderr[-3000:]
    measured = json.loads(run.stdout.splitlines()[-1])
    print(measured)
    assert measured["float64, HF's norms in float64"] <= 1e-12


def long_context_against_hf(path: str) -> dict[str, float]:
    """The exported chapter 10 against Hugging Face, run by
    test_long_context_file_equals_hugging_face in a fresh interpreter (the file holds
    chapter 9's grouped_mm ops: `mixtral_against_hf` says why). (1) A tiny float64
    `MistralForCausalLM` with sliding_window 4, every gain random, built and loaded
    by the file's `mistral_from_hf_config` / `load_hf_mistral`: logits within
    F32_BOUND of their largest entry (HF's RMSNorm computes in float32); greedy
    decoding of 20 tokens past the window (the rings wrap), cached and uncached, gives
    HF generate's tokens. (2) The file's `SlidingWindowSinkAttention` and
    `SinkAttention` with random weights and sinks against `GptOssAttention` (eager,
    sliding and full layers, the file's gpt-oss RoPE): within 1e-12. (3) A two-layer
    `DeepseekV3ForCausalLM` (a dense block and an MoE block whose balancing bias
    changes the choice; YaRN over an original context of 8, on 20 tokens) built and
    loaded by the file's `deepseek_v3_from_hf_config` / `load_hf_deepseek_v3`: logits
    within F32_BOUND, greedy decoding through the latent caches == HF generate."""
    import transformers
    from transformers.models.gpt_oss import modeling_gpt_oss

    if "literate.parts.moe" in sys.modules:
        raise AssertionError("the interpreter must hold the file's grouped_mm ops only")
    era = load(Path(path))
    measured = {}
    config = transformers.MistralConfig(
        vocab_size=61,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        num_hidden_layers=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        sliding_window=4,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    theirs = transformers.MistralForCausalLM(config).double().eval()
    with torch.no_grad():
        for p in theirs.parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)
            else:
                p.normal_(0.0, 0.3)  # continuations that vary
    ours = era.mistral_from_hf_config(config).double().eval()
    era.load_hf_mistral(ours, theirs.state_dict(), config)
    if [b.attn.window for b in ours.blocks] != [4, 4]:
        raise AssertionError("the file's Mistral lost its window")
    ids = torch.randint(0, 61, (2, 12))
    with torch.no_grad():
        measured["mistral logits"] = within(
            worst(["logits"], [ours(ids)], [theirs(ids).logits]), ulps=1
        )
        prompt = ids[:, :6]
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=20,
            do_sample=False,
        )
    got = era.generate(ours, prompt, 20)
    if not torch.equal(got, want) or not torch.equal(ours.generate(prompt, 20), want):
        raise AssertionError("greedy decoding past the window differs from HF's")
    if len(set(got[:, 6:].flatten().tolist())) < 6:
        raise AssertionError("one repeated token proves little")

    oss = transformers.GptOssConfig(
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
        rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    x = torch.randn(2, 9, 32, dtype=F64)
    positions = torch.arange(9)
    for layer, window in ((0, 4), (1, None)):
        theirs = modeling_gpt_oss.GptOssAttention(oss, layer).double().eval()
        make, options = (
            (era.SinkAttention, {})
            if window is None
            else (era.SlidingWindowSinkAttention, {"window": window})
        )
        mine = (
            make(32, 4, 2, d_head=8, bias=True, rope=era.gpt_oss_rope(oss)(), **options)
            .double()
            .eval()
        )
        with torch.no_grad():
            for p in mine.parameters():
                p.normal_(0.0, 0.5)
            mine.sinks.normal_(0.0, 2.0)
        theirs.load_state_dict(mine.state_dict(), strict=True)
        allowed = (
            era.window_allowed(positions, positions, window)
            if window
            else era.causal_allowed(9, 9)
        )
        additive = torch.zeros(allowed.shape, dtype=F64).masked_fill(
            ~allowed, float("-inf")
        )
        cos_sin = modeling_gpt_oss.GptOssRotaryEmbedding(oss)(x, positions[None])
        with torch.no_grad():
            found = worst(
                ["out"],
                [mine(x, causal=True)],
                [theirs(x, cos_sin, additive[None, None])[0]],
            )
        measured[f"GptOssAttention, layer {layer}"] = within(found, atol=1e-12)

    deepseek = transformers.DeepseekV3Config(
        vocab_size=61,
        hidden_size=32,
        intermediate_size=48,
        moe_intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_shared_experts=1,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        q_lora_rank=24,
        kv_lora_rank=16,
        qk_nope_head_dim=10,
        qk_rope_head_dim=6,
        v_head_dim=12,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        initializer_range=0.2,
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10_000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 8,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation="sdpa",
        experts_implementation="eager",
    )
    torch.manual_seed(0)
    theirs = transformers.DeepseekV3ForCausalLM(deepseek).double().eval()
    with torch.no_grad():
        for p in theirs.parameters():
            if p.ndim == 1:
                p.normal_(1.0, 0.3)
        bias = theirs.model.layers[1].mlp.gate.e_score_correction_bias
        bias.copy_(0.3 * torch.randn(bias.shape, dtype=F64))  # it changes the choice
    ours = era.deepseek_v3_from_hf_config(deepseek).double().eval()
    era.load_hf_deepseek_v3(ours, theirs.state_dict(), deepseek)
    if not isinstance(ours.blocks[1].attn.rope, era.YarnRotaryEmbedding):
        raise AssertionError("the file's DeepSeek-V3 lost its YaRN")
    ids = torch.randint(0, 61, (2, 20))  # past YaRN's original context of 8
    with torch.no_grad():
        measured["deepseek-v3 logits"] = within(
            worst(["logits"], [ours(ids)], [theirs(ids).logits]), ulps=1
        )
        prompt = ids[:, :6]
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=10,
            do_sample=False,
        )
    if not torch.equal(era.generate(ours, prompt, 10), want):
        raise AssertionError("DeepSeek-V3's greedy decoding differs from HF's")
    return measured


def test_long_context_file_equals_hugging_face(runs):
    """`long_context_against_hf` in an interpreter of its own, from an empty directory."""
    run = runs["long_context_vs_hf"]
    assert run.returncode == 0, run.stderr[-3000:]
    measured = json.loads(run.stdout.splitlines()[-1])
    print(measured)
    assert measured["mistral logits"] > 0 and measured["deepseek-v3 logits"] > 0
