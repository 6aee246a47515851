"""The era files: which sections of which modules each standalone download holds, in
dependency order, the self-check it ends with and the production classes
tests/test_export.py proves it equal to. `literate.tools.export` assembles them.
"""

# Over 450 lines on purpose: one table, the sections of every standalone file in the
# order the chapters show them; split, a file's sections would be read in two places.

from __future__ import annotations

import importlib
from dataclasses import dataclass

from literate.models.families import family

__all__ = ["Era", "ERAS", "production", "checkpoint_model_types"]


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
    # `python FILE generate CHECKPOINT_DIR ...`: the expressions the file's main passes
    # to `checkpoint_command` as `load` (a directory -> the model) and `decode`
    command: tuple[str, str] | None = None
    # the table (module under literate, name) of the model_types the command loads
    checkpoint_table: tuple[str, str] | None = None


def checkpoint_model_types(era: Era) -> list[str]:
    """The config.json model_types the era file's `generate` command loads."""
    if era.checkpoint_table is None:
        return []
    module, name = era.checkpoint_table
    return list(getattr(importlib.import_module(f"literate.{module}"), name))


def production(family_name: str) -> str:
    """The production class a model family is proven equal to (`FAMILIES`)."""
    return f"transformers.{family(family_name).hf_model}"


CHECKS = tuple(
    ("parts.checks", s)
    for s in (
        "misfit_weight",
        "checked_entry",
        "weights_fit",
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
    ("parts.positions", "llama3_rope"),
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


def checkpoints(table: str) -> tuple[tuple[str, str], ...]:
    """The sections that read a checkpoint directory and run the `generate` command,
    with the era's table of loaders by model_type
    (`literate.models.checkpoint_loaders`)."""
    return (
        ("models.checkpoint", "safetensors_dtypes"),
        ("models.checkpoint", "read_safetensors"),
        ("models.checkpoint", "checkpoint_files"),
        ("models.checkpoint", "checkpoint_state"),
        ("models.checkpoint", "stacked_experts"),
        ("models.checkpoint", "load_checkpoint"),
        ("models.checkpoint", "checkpoint_command"),
        ("models.checkpoint", "cached_decode"),
        ("models.checkpoint_loaders", table),
    )


def command(table: str) -> tuple[str, str]:
    """`checkpoint_command`'s load and decode in an era file."""
    return (f"lambda directory: load_checkpoint(directory, {table})", "cached_decode")


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
        + DECODING
        + checkpoints("gpt2"),
        "check_gpt2",
        (production("gpt2"),),
        library=LIBRARY,
        command=command("GPT2_CHECKPOINTS"),
        checkpoint_table=("models.checkpoint_loaders", "GPT2_CHECKPOINTS"),
    ),
    "llama": Era(
        "The modern block (chapter 7): RMSNorm, SwiGLU, the Llama block and language\n"
        "model with generate; QK-norm, the sandwich, the output norm and the parallel\n"
        "residual (Qwen3, OLMo 2, Gemma 3, GPT-J, GPT-NeoX, Cohere); whole models that\n"
        "load Hugging Face's Llama, Qwen3, GPT-NeoX, GPT-J and Cohere; decoding with a\n"
        "KV cache and beam search (chapter 8)",
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
            ("models.qwen3", "qwen3_model"),
            ("models.qwen3", "qwen3_from_hf_config"),
            ("models.qwen3", "check_qwen3_config"),
            ("models.qwen3", "load_hf_qwen3"),
            ("models.parallel", "neox_qkv"),
            ("models.parallel", "from_hf_config"),
            ("models.parallel", "check_block_config"),
            ("models.parallel", "load_hf_blocks"),
            ("models.parallel", "parallel_model"),
            ("models.gpt_neox", "gpt_neox_from_hf_config"),
            ("models.gpt_neox", "check_gpt_neox_config"),
            ("models.gpt_neox", "load_hf_gpt_neox"),
            ("models.gptj", "gptj_from_hf_config"),
            ("models.gptj", "check_gptj_config"),
            ("models.gptj", "load_hf_gptj"),
            ("models.cohere", "logit_scaled_head"),
            ("models.cohere", "cohere_from_hf_config"),
            ("models.cohere", "check_cohere_config"),
            ("models.cohere", "load_hf_cohere"),
        )
        + DECODING
        + checkpoints("llama"),
        "check_llama",
        (production("llama"),),
        library=LIBRARY,
        command=command("LLAMA_CHECKPOINTS"),
        checkpoint_table=("models.checkpoint_loaders", "LLAMA_CHECKPOINTS"),
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
QWEN3_MOE = tuple(
    ("models.qwen3_moe", s)
    for s in (
        "qwen3_moe_block",
        "qwen3_moe_model",
        "qwen3_moe_from_hf_config",
        "check_qwen3_moe_config",
        "load_hf_qwen3_moe",
    )
)
ERAS["mixtral"] = Era(
    "Mixture of experts (chapter 9) on the modern block: the routers of Switch,\n"
    "Mixtral, Qwen3-MoE, DeepSeek-V3 and gpt-oss, the experts, dropless and capacity\n"
    "dispatch, the balancing loss and the loss-free bias, and Mixtral and Qwen3-MoE\n"
    "with Hugging Face loading; the tiny MoE of its notebook; with everything of the\n"
    "Llama file (chapters 1-8)",
    "chapters 1-9",
    ERAS["llama"].sections
    + MOE
    + MIXTRAL
    + QWEN3_MOE
    + (("models.checkpoint_loaders", "mixtral"),),
    "check_mixtral",
    (production("mixtral"),),
    library=LIBRARY,
    command=command("MIXTRAL_CHECKPOINTS"),
    checkpoint_table=("models.checkpoint_loaders", "MIXTRAL_CHECKPOINTS"),
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
    ERAS["mixtral"].sections
    + LONG_CONTEXT
    + (("models.checkpoint_loaders", "long_context"),),
    "check_long_context",
    (
        production("mistral"),
        "transformers.models.gpt_oss.modeling_gpt_oss.GptOssAttention",
        production("deepseek_v3"),
    ),
    library=LIBRARY,
    command=command("LONG_CONTEXT_CHECKPOINTS"),
    checkpoint_table=("models.checkpoint_loaders", "LONG_CONTEXT_CHECKPOINTS"),
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
            ("checkpoint", "safetensors_dtypes"),
            ("checkpoint", "load_safetensors"),
            ("checkpoint", "load_checkpoint"),
            ("checkpoint", "quick_decode"),
        )
    )
    + (
        ("models.checkpoint", "checkpoint_files"),
        ("models.checkpoint", "checkpoint_command"),
    ),
    "check_quick",
    (production("llama"), "transformers.Qwen3ForCausalLM"),
    check_module="minimal.check",
    command=("quick_model_from_checkpoint", "quick_decode"),
    checkpoint_table=("minimal.checkpoint", "QUICK_MODEL_TYPES"),
)
