"""One verified file per era, assembled from the sections the pages show.

    python -m literate.tools.export --list
    python -m literate.tools.export gpt2               # to standard output
    python -m literate.tools.export gpt2 -o gpt2.py    # to a file

An era is a list of snippet sections (the `start:name` / `end:name` markers of a
`literate/` module), in dependency order: the very code the chapter pages include, so what a reader downloads
is what the site shows and tests. The file imports only the standard library and torch
(the imports are taken from the source modules, kept if the assembled code uses them),
and ends with a self-check (`literate/tools/selfcheck.py`) that runs under
`if __name__ == "__main__":`. tests/test_export.py runs every file in a fresh interpreter
from an empty directory and compares it with its production reference; the site build
writes them to `downloads/` for each chapter to link.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from literate.models.families import family
from literate.tools.standalone import check_module_source, library

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["Era", "ERAS", "section_source", "used_sections", "assemble", "main"]


@dataclass(frozen=True)
class Era:
    title: str
    chapters: str  # which pages show these sections
    sections: tuple[
        tuple[str, str], ...
    ]  # (dotted module under literate, section name)
    self_check: str  # a function of `check_module` (literate/tools/selfcheck.py)
    # the production classes tests/test_export.py proves the file's layers equal to
    equals: tuple[str, ...] = ()
    check_module: str = "tools.selfcheck"
    # sections taken only where the file uses a name they define (chapters 1-3's
    # parts in a later era's file: no sinusoidal table in the Llama file)
    library: tuple[tuple[str, str], ...] = ()


def production(family_name: str) -> str:
    """The production class a model family is proven equal to (`FAMILIES`)."""
    return f"transformers.{family(family_name).hf_model}"


CHECKS = tuple(
    ("parts.checks", s)
    for s in (
        "checked_entry",
        "positive_int",
        "non_negative_int",
        "positive_float",
        "probability",
        "boolean",
        "choice",
        "float_dtype",
        "float_tensor",
        "bool_tensor",
        "features",
    )
)
ATTENTION = (  # chapters 1-3, in reading order
    ("parts.attention", "empty_row_policies"),
    ("parts.attention", "check_mask"),
    ("parts.attention", "masked_softmax"),
    ("parts.attention", "causal_allowed"),
    ("parts.attention", "padding_allowed"),
    ("parts.attention", "attention_result"),
    ("parts.attention", "check_qkv"),
    ("parts.attention", "refuse_empty_rows"),
    ("parts.attention", "scaled_dot_product_attention"),
    ("tools.syncs", "host_reads"),
    ("parts.positions", "checks"),
    ("parts.positions", "sinusoidal_table"),
    ("parts.positions", "sinusoidal_shift"),
    ("parts.positions", "learned_positions"),
    ("parts.positions", "rope_cache"),
    ("parts.positions", "rotate_half"),
    ("parts.positions", "check_rope"),
    ("parts.positions", "apply_rope"),
    ("parts.positions", "apply_rope_interleaved"),
    ("parts.positions", "interleaved_to_half_permutation"),
    ("parts.positions", "rotary_embedding"),
    ("parts.multi_head", "split_heads"),
    ("parts.multi_head", "merge_heads"),
    ("parts.multi_head", "grouped_attention"),
    ("parts.multi_head", "fused_attention"),
    ("parts.multi_head", "attention_allowed"),
    ("parts.cache", "kv_cache"),
    ("parts.cache", "memory_kv"),
    ("parts.multi_head", "checks"),
    ("parts.multi_head", "multi_head_attention"),
    ("parts.multi_head", "packed_qkv"),
    ("numbers.params", "attention_params"),
    ("numbers.params", "kv_cache_bytes_per_token"),
    ("numbers.params", "published_attention"),
)
DECODING = (
    ("parts.cache", "decode_cache"),
    ("decoding.generate", "cached_run"),  # chapter 8
    ("decoding.generate", "check_prompt"),
    ("decoding.generate", "generate"),
    ("decoding.beam", "length_penalties"),
    ("decoding.beam", "beam_search"),
    ("decoding.beam", "beam_generate"),
    ("tools.selfcheck", "check_decoding"),
)
MODELS = (
    ("parts.checks", "token_ids"),
    ("parts.checks", "ids_in_vocabulary"),
    ("parts.norms", "layer_norm"),
    ("parts.norms", "layer_norm_module"),
    ("parts.ffn", "check_activation"),
    ("parts.ffn", "dense_ffn"),
    ("parts.blocks", "same_width"),
)

LIBRARY = CHECKS + ATTENTION + MODELS

ERAS: dict[str, Era] = {
    "attention": Era(
        "Attention: scaled dot-product attention, positions, multi-head,\ngrouped-query "
        "and multi-query attention, the KV cache",
        "chapters 1-3",
        CHECKS + ATTENTION + (("numbers.studies", "score_statistics"),),
        "check_attention",
        ("torch.nn.MultiheadAttention",),
    ),
    "transformer2017": Era(
        "The 2017 encoder-decoder (Vaswani et al. 2017): post-norm layers,\nthe model, its "
        "learning-rate schedule, label smoothing, greedy decoding, and\ndecoding with "
        "caches and beam search (chapter 8)",
        "chapters 1-4 and 8",
        (
            ("parts.blocks", "post_norm_encoder_layer"),
            ("parts.blocks", "post_norm_decoder_layer"),
            ("parts.blocks", "builders_2017"),
            ("models.transformer2017", "shift_right"),
            ("models.transformer2017", "transformer_lr"),
            ("models.transformer2017", "smoothing_targets"),
            ("models.transformer2017", "label_smoothed_nll"),
            ("models.transformer2017", "encoder_decoder"),
            ("models.transformer2017", "cross_attention_weights"),
            ("models.torch_twins", "twin_eps"),
            ("models.torch_twins", "torch_twins"),
            ("decoding.beam", "length_penalties"),
            ("decoding.beam", "beam_search"),
            ("models.transformer2017_decoding", "seq2seq_cache"),
            ("models.transformer2017_decoding", "new_seq2seq_cache"),
            ("models.transformer2017_decoding", "cached_decode_step"),
            ("models.transformer2017_decoding", "cached_greedy_decode"),
            ("models.transformer2017_decoding", "beam_translate"),
        ),
        "check_transformer2017",
        ("torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder"),
        library=LIBRARY,
    ),
    "gpt2": Era(
        "GPT-2 (Radford et al. 2019): the pre-norm block, the language model,\ngenerate, "
        "sampling, loading Hugging Face GPT-2 weights by name, and decoding\nwith a KV "
        "cache: left-padded batches, chunked prefill, beam search",
        "chapters 1-6 and 8",
        (
            ("parts.ffn", "gelu_tanh"),
            ("parts.blocks", "pre_norm_block"),
            ("parts.blocks", "builder_gpt2"),
            ("decoding.sampling", "greedy"),
            ("models.decoder", "decoder_language_model"),
            ("models.gpt2", "gpt_language_model"),
            ("models.gpt2", "gpt2_init"),
            ("models.gpt2", "gpt2_model"),
            ("models.gpt2", "hf_activation"),
            ("models.gpt2", "gpt2_from_hf_config"),
            ("models.gpt2", "check_gpt2_config"),
            ("models.gpt2", "load_hf_gpt2"),
            ("models.gpt2", "next_token_loss"),
            ("decoding.sampling", "checks"),
            ("decoding.sampling", "top_k_filter"),
            ("decoding.sampling", "top_p_filter"),
            ("decoding.sampling", "filter_logits"),
            ("decoding.sampling", "next_token_distribution"),
            ("decoding.sampling", "greedy_step"),
            ("decoding.sampling", "draw"),
            ("decoding.sampling", "sample_step"),
            ("decoding.sampling", "sampler"),
        )
        + DECODING,
        "check_gpt2",
        (production("gpt2"),),
        library=LIBRARY,
    ),
    "llama": Era(
        "The modern block (chapter 7): RMSNorm, SwiGLU, the Llama block and language\n"
        "model with generate and Hugging Face Llama loading; QK-norm, the sandwich, the\n"
        "output norm and the parallel residual (Qwen3, OLMo 2, Gemma 3, GPT-J, GPT-NeoX,\n"
        "Cohere); decoding with a KV cache and beam search (chapter 8)",
        "chapters 1-8",
        (
            ("parts.ffn", "gelu_tanh"),
            ("parts.norms", "rms_norm"),
            ("parts.norms", "rms_norm_module"),
            ("parts.norms", "zero_centred_rms_norm"),
            ("parts.ffn", "gated_ffn"),
            ("parts.ffn", "llama_ffn_width"),
            ("parts.blocks", "pre_norm_block"),
            ("parts.blocks", "sandwich_block"),
            ("parts.blocks", "output_norm_block"),
            ("parts.blocks", "parallel_block"),
            ("parts.blocks", "builder_llama"),
            ("parts.blocks", "builder_qwen3"),
            ("parts.blocks", "builder_olmo2"),
            ("parts.blocks", "builder_gemma3"),
            ("parts.blocks", "builders_parallel"),
            ("decoding.sampling", "greedy"),
            ("models.decoder", "decoder_language_model"),
            ("models.gpt2", "next_token_loss"),
            ("decoding.sampling", "checks"),
            ("decoding.sampling", "top_k_filter"),
            ("decoding.sampling", "top_p_filter"),
            ("decoding.sampling", "filter_logits"),
            ("decoding.sampling", "next_token_distribution"),
            ("decoding.sampling", "greedy_step"),
            ("decoding.sampling", "draw"),
            ("decoding.sampling", "sample_step"),
            ("decoding.sampling", "sampler"),
            ("models.llama", "llama_language_model"),
            ("models.llama", "llama_model"),
            ("models.llama", "llama_from_hf_config"),
            ("models.llama", "check_llama_config"),
            ("models.llama", "load_renamed"),
            ("models.llama", "load_hf_llama"),
        )
        + DECODING,
        "check_llama",
        (production("llama"),),
        library=LIBRARY,
    ),
}
MOE = tuple(
    ("parts.routers", s)
    for s in (  # chapter 9, in reading order
        "router_logits_and_k",
        "switch_router",
        "mixtral_router",
        "qwen3_moe_router",
        "deepseek_v3_router",
        "gpt_oss_router",
        "router",
        "deepseek_v3_router_module",
    )
) + tuple(
    ("parts.moe", s)
    for s in (
        "grouped_mm",
        "experts",
        "clamped_swiglu",
        "gpt_oss_experts",
        "dispatch",
        "dropped_pairs",
        "moe_ffn",
        "load_balancing_loss",
        "update_balancing_bias",
    )
)
MIXTRAL = tuple(
    ("models.mixtral", s)
    for s in (
        "mixtral_block",
        "mixtral_model",
        "mixtral_from_hf_config",
        "check_mixtral_config",
        "load_hf_mixtral",
        "router_aux_loss",
        "moe_params",
    )
) + tuple(
    ("numbers.moe_training", s)
    for s in ("tiny_moe_task", "train_tiny_moe", "imbalance")
)
ERAS["mixtral"] = Era(
    "Mixture of experts (chapter 9) on the modern block: the routers of Switch,\n"
    "Mixtral, Qwen3-MoE, DeepSeek-V3 and gpt-oss, the experts, dropless and capacity\n"
    "dispatch, the balancing loss and the loss-free bias, and Mixtral with Hugging\n"
    "Face Mixtral loading; the tiny MoE of its notebook; with everything of the\n"
    "Llama file (chapters 1-8)",
    "chapters 1-9",
    ERAS["llama"].sections + MOE + MIXTRAL,
    "check_mixtral",
    (production("mixtral"),),
    library=LIBRARY,
)

LONG_CONTEXT = (  # chapter 10, in reading order (yarn before the MLA layer uses it)
    ("parts.window", "window_allowed"),
    ("parts.window", "window_attention_allowed"),
    ("parts.window", "ring_kv_cache"),
    ("parts.window", "sliding_window_attention"),
    ("models.mistral", "mistral"),
    ("parts.rope_scaling", "linear_rope"),
    ("models.gemma3", "gemma3_language_model"),
    ("models.gemma3", "gemma3_from_hf_config"),
    ("models.gemma3", "check_gemma3_config"),
    ("parts.sinks", "sink_attention"),
    ("parts.sinks", "sink_share"),
    ("parts.sinks", "sink_layers"),
    ("parts.mla", "latent_cache"),
    ("parts.mla", "absorbed"),
    ("parts.mla", "latent_attention"),
    ("parts.mla", "mla_checks"),
    ("parts.rope_scaling", "yarn"),
    ("parts.mla", "multi_head_latent_attention"),
    ("models.deepseek_v3", "mla_from_hf_config"),
    ("parts.mla", "cache_bytes"),
    ("models.deepseek_v3", "deepseek_v3_from_hf_config"),
    ("models.deepseek_v3", "load_hf_deepseek_v3"),
    ("models.gpt_oss", "gpt_oss_block"),
    ("models.gpt_oss", "gpt_oss_model"),
    ("models.gpt_oss", "gpt_oss_from_hf_config"),
    ("models.gpt_oss", "check_gpt_oss_config"),
    ("models.gpt_oss", "load_hf_gpt_oss"),
    ("models.gpt_oss", "gpt_oss_aux_loss"),
    ("numbers.params", "cache_ledger"),
)
ERAS["long_context"] = Era(
    "Long context (chapter 10): sliding windows and their ring caches (Mistral,\n"
    "Gemma 3), attention sinks, multi-head latent attention with YaRN and DeepSeek-V3,\n"
    "gpt-oss, each with Hugging Face loading, and the cache ledger; with everything\n"
    "of the Mixtral file (chapters 1-9)",
    "chapters 1-10",
    ERAS["mixtral"].sections + LONG_CONTEXT,
    "check_long_context",
    (
        production("mistral"),
        "transformers.models.gpt_oss.modeling_gpt_oss.GptOssAttention",
        production("deepseek_v3"),
    ),
    library=LIBRARY,
)

ERAS["quick"] = Era(
    "The quick path: a modern decoder-only model (Llama, Qwen3 with QK-norm) in\n"
    "plain PyTorch: RMSNorm, RoPE, grouped-query attention, SwiGLU, a KV cache,\n"
    "generate, and loading Hugging Face weights",
    "the quick path",
    tuple(
        ("minimal." + m, s)
        for m, s in (
            ("attention", "scaled_dot_product_attention"),
            ("attention", "causal_mask"),
            ("positions", "rope_tables"),
            ("positions", "apply_rope"),
            ("multi_head", "split_heads"),
            ("multi_head", "merge_heads"),
            ("cache", "kv_cache"),
            ("norms", "rms_norm"),
            ("multi_head", "gq_attention"),
            ("ffn", "swiglu"),
            ("llama", "llama_block"),
            ("llama", "llama_model"),
            ("generate", "generate"),
            ("llama", "load_hf_llama"),
        )
    ),
    "check_quick",
    (production("llama"), "transformers.Qwen3ForCausalLM"),
    check_module="minimal.check",
)

MARKER = "# --8<-- [{kind}:{name}]"


def module_path(module: str) -> Path:
    """literate/parts/attention.py for "parts.attention"."""
    return ROOT / "literate" / (module.replace(".", "/") + ".py")


def section_source(module: str, name: str) -> str:
    """The lines of one snippet section of a `literate` module (dotted, e.g.
    "parts.attention"), markers excluded."""
    if not module_path(module).is_file():
        raise KeyError(f"no module literate.{module}")
    lines = module_path(module).read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(MARKER.format(kind="start", name=name))
        end = lines.index(MARKER.format(kind="end", name=name))
    except ValueError:
        raise KeyError(
            f"{module_path(module).relative_to(ROOT)} has no section {name!r}"
        ) from None
    return "\n".join(lines[start + 1 : end]).strip("\n")


def _library_imports(module: str) -> list[ast.stmt]:
    tree = ast.parse(module_path(module).read_text(encoding="utf-8"))
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and library(stmt.module):
            found.append(stmt)
        elif isinstance(stmt, ast.Import) and all(library(a.name) for a in stmt.names):
            found.append(stmt)
    return found


def _imports(modules: list[str], code: str) -> list[str]:
    """The standard-library and torch imports of the source modules that `code` uses,
    merged per module, `from __future__` first, then the standard library, then torch."""
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    for module in modules:
        for stmt in _library_imports(module):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound in used:
                        plain.add(
                            f"import {alias.name}"
                            + (f" as {alias.asname}" if alias.asname else "")
                        )
            elif stmt.module != "__future__":
                for alias in stmt.names:
                    if (alias.asname or alias.name) in used:
                        entry = alias.name + (
                            f" as {alias.asname}" if alias.asname else ""
                        )
                        froms.setdefault(stmt.module, set()).add(entry)
    lines = sorted(plain)
    lines += [
        f"from {m} import {', '.join(sorted(names))}"
        for m, names in sorted(froms.items())
    ]
    stdlib = sorted(s for s in lines if not s.split()[1].startswith("torch"))
    torch_ = sorted(s for s in lines if s.split()[1].startswith("torch"))
    return ["from __future__ import annotations", ""] + stdlib + [""] + torch_


def _top_level_names(stmt: ast.stmt) -> list[str]:
    """The names a top-level def, class or assignment binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = (
        stmt.targets
        if isinstance(stmt, ast.Assign)
        else [stmt.target]
        if isinstance(stmt, ast.AnnAssign)
        else []
    )
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def used_sections(era: Era) -> list[tuple[str, str]]:
    """The era's sections and its self-check, with the sections of its library that
    they use (by name, transitively), all in the library's then the era's order."""
    kept = list(era.sections) + [(era.check_module, era.self_check)]
    library = [s for s in era.library if s not in kept]
    defines = {
        s: {
            n
            for stmt in ast.parse(section_source(*s)).body
            for n in _top_level_names(stmt)
        }
        for s in library
    }
    wanted = set(kept)
    todo = [section_source(*s) for s in kept]
    while todo:
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", todo.pop()))
        for s in library:
            if s not in wanted and defines[s] & used:
                wanted.add(s)
                todo.append(section_source(*s))
    return [s for s in library if s in wanted] + kept


def assemble(name: str) -> str:
    """The standalone file of era `name`, as text."""
    if name not in ERAS:
        raise KeyError(f"no era {name!r}; eras: {sorted(ERAS)}")
    era = ERAS[name]
    chosen = used_sections(era)
    parts, modules = [], []
    for module, section in chosen:
        parts.append(section_source(module, section))
        modules.append(module)
    body = "\n\n\n".join(parts)
    header = (
        f'"""{era.title}.\n\n'
        f"The code of {era.chapters} of Transformer Blocks, literate, as one file: the\n"
        "very sections the pages show and test, in dependency order, written by\n"
        f"`python -m literate.tools.export {name}`. It needs only Python >= 3.11 and\n"
        f"torch >= 2.7. `python {name}.py` runs its self-check ({era.self_check}).\n"
        '"""'
    )
    main = (
        f'\n\n\nif __name__ == "__main__":\n    {era.self_check}()\n'
        f'    print("{name}.py: self-check passed")\n'
    )
    text = (
        "\n".join([header, ""] + _imports(list(dict.fromkeys(modules)), body))
        + "\n\n\n"
        + body
        + main
    )
    defined = [n for stmt in ast.parse(body).body for n in _top_level_names(stmt)]
    twice = sorted({n for n in defined if defined.count(n) > 1})
    if twice:  # a later section would silently replace an earlier one's definition
        raise ValueError(f"{name}.py defines {twice} more than once")
    problems = check_module_source(text, where=f"{name}.py")
    if problems:
        raise ValueError(
            "the era does not stand alone:\n  " + "\n  ".join(map(str, problems))
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m literate.tools.export", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", nargs="?", help=f"one of {sorted(ERAS)}")
    parser.add_argument(
        "-o", "--output", type=Path, help="write here instead of standard output"
    )
    parser.add_argument("--list", action="store_true", help="list the eras and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, era in ERAS.items():
            title = era.title.replace("\n", " ")
            print(
                f"{name:16} {era.chapters:13} {len(era.sections):3} sections  {title}"
            )
        return 0
    if args.name is None:
        parser.error("name an era, or pass --list")
    try:
        text = assemble(args.name)
    except KeyError as error:
        parser.error(str(error.args[0]))
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text.splitlines())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
