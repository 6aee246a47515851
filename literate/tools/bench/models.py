"""The rows of whole models: one per family of `literate.models.families.FAMILIES`, read
from the table, so a family added there is timed here with no edit. Each row builds
Hugging Face's model from one configuration (the shared shape below, then the family's
`bench` keywords), ours from the same configuration by the family's
`<name>_from_hf_config`, loads HF's weights into ours by the family's loader, and times
the logits of one batch."""

from __future__ import annotations

import torch

from literate.models.families import FAMILIES, Family
from literate.tools.bench.common import fwd, max_diff

# The shape every family's timed model shares: 4 layers of width 256, 4 query heads
# over 2 key/value heads, a 5,000-token vocabulary (GPT-2's configuration reads the
# same names through its aliases; its FFN is 4d, it has no key/value heads).
SHAPE = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "vocab_size": 5000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "attn_implementation": "sdpa",
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}
BATCH, LENGTH = 4, 128


def configuration(row: Family) -> dict:
    """The keywords of the family's timed configuration: `SHAPE`, then its own."""
    return SHAPE | row.bench


def row_name(row: Family) -> str:
    return f"{row.title} model fwd, 4 layers d=256 T={LENGTH} B={BATCH}"


def reference(row: Family) -> str:
    return f"HF {row.hf_model} ({configuration(row)['attn_implementation']})"


def family_model_forward(row: Family, batch: int = BATCH, length: int = LENGTH):
    def build():
        import transformers

        torch.manual_seed(0)
        config = getattr(transformers, row.hf_config)(**configuration(row))
        theirs = getattr(transformers, row.hf_model)(config).eval()
        ours = row.function("from_hf_config")(config, **row.inference_options)
        ours = row.function("load")(ours.eval(), theirs.state_dict(), config)
        ids = torch.randint(0, config.vocab_size, (batch, length))
        a = fwd(ours, ids)

        def hf():
            with torch.no_grad():
                return theirs(ids).logits

        return a, hf, max_diff(a(), hf())

    return build


def model_rows() -> list[tuple[str, str, object]]:
    """(name, reference, build) of each family's row, in the table's order."""
    return [(row_name(r), reference(r), family_model_forward(r)) for r in FAMILIES]
