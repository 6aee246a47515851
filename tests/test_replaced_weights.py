"""A weight replaced by hand with one of another shape (issue 27): the layer or model it
belongs to names it, `blocks.0.attn.q_proj.weight has shape (32, 33), but its Linear was
built for (32, 32)`, where torch would say "mat1 and mat2 shapes cannot be multiplied".

A layer called from outside checks its own Linear weights before it computes
(`weights_fit`, shapes only); a model's entry reads them only after torch has failed
(`checked_entry(model)`), so a forward that works pays nothing. The replaced weight is
left as the caller set it, and the model's error keeps torch's as its cause.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from literate.decoding.generate import cached_run, new_decode_cache
from literate.models.gpt2 import gpt2_model
from literate.models.llama import llama_model
from literate.models.mixtral import mixtral_model
from literate.parts.checks import checked_entry, misfit_weight, weights_fit
from literate.parts.ffn import DenseFFN, GatedFFN
from literate.parts.multi_head import MultiHeadAttention


def _replace(module: nn.Module, path: str, *, extra: int = 1, axis: int = -1) -> Tensor:
    part = module.get_submodule(path.rsplit(".", 1)[0]) if "." in path else module
    name = path.rsplit(".", 1)[-1]
    shape = list(getattr(part, name).shape)
    shape[axis] += extra
    wrong = nn.Parameter(torch.randn(shape))
    setattr(part, name, wrong)
    return wrong


MODELS = {
    "gpt2": lambda: gpt2_model(
        vocab_size=50, context=16, d_model=32, n_heads=4, n_layers=2, dropout=0.0
    ),
    "llama": lambda: llama_model(
        vocab_size=50,
        context=16,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=48,
    ),
    "mixtral": lambda: mixtral_model(
        vocab_size=50,
        context=16,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=24,
        n_experts=4,
        top_k=2,
    ),
}


# A forward that works reads no weight's shape: one row too many in an embedding table
# (ids never reach it) or in the head (one more logit) fails nowhere, so nothing names it.
UNREAD = {"token_embedding.weight", "positions.embedding.weight", "lm_head.weight"}


def _linear_paths(model: nn.Module) -> list[str]:
    return [
        f"{name}.weight"
        for name, part in model.named_modules()
        if isinstance(part, (nn.Linear, nn.Embedding))
    ]


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("axis", [-1, 0])
def test_a_model_names_every_replaced_weight(family, axis):
    """Every Linear and Embedding weight of the model, replaced one at a time by one a
    column (or a row) too many, is named by the forward and by a cached run; the
    replaced tensor stays the caller's."""
    paths = _linear_paths(MODELS[family]())
    assert len(paths) >= 9, paths
    ids = torch.randint(0, 50, (2, 5))
    named = 0
    for path in paths:
        model = MODELS[family]().eval()
        wrong = _replace(model, path, axis=axis)
        try:
            model(ids)
        except ValueError as error:
            assert str(error).startswith(f"{path} has shape "), (path, error)
            assert "was built for" in str(error)
            assert isinstance(error.__cause__, (RuntimeError, ValueError))  # kept
            named += 1
        else:  # an extra row of a table or of the head: nothing fails, nothing is read
            assert axis == 0 and path in UNREAD, path
            continue
        assert model.get_submodule(path.rsplit(".", 1)[0]).weight is wrong
        cache = new_decode_cache(model, batch=2, capacity=8)
        with pytest.raises(ValueError, match=rf"^{path} has shape"):
            cached_run(model, ids, cache)
    unread = [p for p in paths if p in UNREAD] if axis == 0 else []
    assert named == len(paths) - len(unread)


def test_a_layer_called_from_outside_names_its_replaced_weight():
    attention = MultiHeadAttention(32, 4, n_kv_heads=2)
    ffns = [GatedFFN(32, 48, F.silu), DenseFFN(32, 64, F.gelu)]
    x = torch.randn(2, 5, 32)
    for path in ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"):
        layer = MultiHeadAttention(32, 4, n_kv_heads=2)
        _replace(layer, path)
        with pytest.raises(
            ValueError,
            match=rf"^{path} has shape \(\d+, \d+\), but its "
            r"Linear was built for",
        ):
            layer(x, causal=True)
    for ffn in ffns:
        path = "down_proj.weight"
        _replace(ffn, path)
        with pytest.raises(ValueError, match=rf"^{path} has shape"):
            ffn(x)
    assert attention(x, causal=True).shape == (2, 5, 32)  # untouched layers still work


def test_biases_are_read_too_and_a_layer_that_fits_passes():
    layer = DenseFFN(32, 64, F.gelu)
    assert misfit_weight(layer) is None
    weights_fit(layer)  # nothing to say
    layer.up_proj.bias = nn.Parameter(torch.zeros(65))
    assert misfit_weight(layer) == (
        "up_proj.bias has shape (65,), but its Linear was built for (64,): a replaced "
        "weight must keep its shape"
    )


def test_inside_an_entry_a_layer_reads_no_weight_and_torch_errors_pass_unchanged():
    layer = GatedFFN(32, 48, F.silu)
    _replace(layer, "up_proj.weight")
    with checked_entry():  # an entry without a module: torch's message, as it was
        weights_fit(layer)  # skipped inside an entry
        with pytest.raises(RuntimeError, match="mat1 and mat2"):
            layer(torch.randn(1, 3, 32))
    fine = GatedFFN(32, 48, F.silu)
    with pytest.raises(RuntimeError, match="a failure of its own"):
        with checked_entry(fine):  # all weights fit: the error is not rewritten
            raise RuntimeError("a failure of its own")
