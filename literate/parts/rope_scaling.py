"""RoPE for contexts longer than training: linear interpolation and YaRN (chapter 10).

Both keep chapter 2's `RotaryEmbedding` and change only its frequencies (and, for YaRN,
the size of cos and sin):

* **linear** (Chen et al. 2023; Gemma 3's global layers, factor 8): every position is
  divided by the factor, so all frequencies are;
* **YaRN** (Peng et al. 2023; DeepSeek-V3, factor 40, and gpt-oss, factor 32): high
  frequencies, which turn many times within the original context, are kept; low ones,
  which never complete a turn there, are interpolated by the factor; a ramp linear in
  the pair index between `beta_fast` and `beta_slow` turns mixes the two; cos and sin are multiplied by
  an `attention_factor` (Hugging Face's `attention_scaling`), by default
  `yarn_mscale(factor)` = 0.1 ln(factor) + 1, which sharpens the softmax that longer
  contexts flatten (sec. 3.4). DeepSeek-V3 keeps it at 1 and puts the correction into
  the softmax scale instead (`literate/models/deepseek_v3.py`, `deepseek_rope`).

`yarn_settings` reads a config's `rope_parameters` into ours; `rope_settings` gives a
layer's back, for the loaders' checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from literate.parts.checks import boolean, positive_float, positive_int
from literate.parts.positions import RotaryEmbedding, base_above_one

__all__ = [
    "LinearScaledRotaryEmbedding",
    "yarn_mscale",
    "yarn_inverse_frequencies",
    "YarnRotaryEmbedding",
    "yarn_settings",
    "rope_settings",
]


# --8<-- [start:linear_rope]
class LinearScaledRotaryEmbedding(RotaryEmbedding):
    """Chapter 2's RotaryEmbedding with every frequency divided by `factor`, so that
    position p turns as p / factor did: linear position interpolation (Chen et al.
    2023). Hugging Face's "linear" rope_type, in its float32 order of operations
    (`_compute_linear_scaling_rope_parameters`): inv_freq = 1 / base^(2i/d), then
    inv_freq / factor, then position x inv_freq. Gemma 3 4B, 12B and 27B's global
    layers: factor 8."""

    def __init__(self, d_head: int, *, base: float = 10_000.0, factor: float,
                 rotary_dim: int | None = None, layout: str = "half") -> None:
        super().__init__(d_head, base=base, rotary_dim=rotary_dim, layout=layout)
        self.factor = positive_float("factor", factor)

    def tables(self, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin [>= length, rotary_dim], float32, grown as chapter 2's are."""
        current = self.cos.shape[0]
        if length > current or self.cos.dtype != torch.float32:
            n = current if length <= current else max(length, 2 * current)
            device, r = self.cos.device, self.rotary_dim
            pair = torch.arange(0, r, 2, dtype=torch.int64, device=device)  # 2i
            inv_freq = 1.0 / (self.base ** (pair.float() / r))  # [r/2], float32
            inv_freq = inv_freq / self.factor  # HF: inv_freq /= factor
            pos = torch.arange(n, dtype=torch.int64, device=device).float()  # [n]
            angles = torch.outer(pos, inv_freq)  # [n, r/2]
            angles = torch.cat((angles, angles), dim=-1)  # [n, r]: both halves
            self.cos, self.sin = angles.cos(), angles.sin()
            h = r // 2
            self.signed_sin = torch.cat((-self.sin[:, :h], self.sin[:, h:]), dim=-1)
        return self.cos, self.sin
# --8<-- [end:linear_rope]


# --8<-- [start:yarn]
def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction (Peng et al. 2023, sec. 3.4): 0.1 mscale ln(factor)
    + 1 for a context stretched `factor` times, 1 if it is not stretched."""
    factor, mscale = positive_float("factor", factor), positive_float("mscale", mscale)
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_inverse_frequencies(d_rope: int, *, base: float, factor: float,
                             original_context: int, beta_fast: float = 32.0,
                             beta_slow: float = 1.0, truncate: bool = True) -> Tensor:
    """YaRN's frequencies, "NTK-by-parts" (Peng et al. 2023, sec. 3.2), [d_rope / 2],
    float32, computed as Hugging Face's `_compute_yarn_parameters` does. Pair i keeps
    its frequency theta_i = base^(-2i/d) where it turns more than `beta_fast` times
    over the original context (short wavelengths: their angles were all seen in
    training), is divided by `factor` where it turns fewer than `beta_slow` times
    (positions interpolated into the trained range), with a ramp between that is
    linear in the pair index i, so in log(turns), as in YaRN's reference code and
    Hugging Face (the paper's gamma is linear in the turns themselves)."""
    d_rope, base = positive_int("d_rope", d_rope), base_above_one("base", base)
    if d_rope % 2:
        raise ValueError(f"d_rope must be even: coordinates rotate in pairs; got "
                         f"{d_rope}")
    factor = positive_float("factor", factor)
    context = positive_int("original_context", original_context)
    beta_fast = positive_float("beta_fast", beta_fast)
    if beta_fast < positive_float("beta_slow", beta_slow):
        raise ValueError(f"beta_fast={beta_fast} must be >= beta_slow={beta_slow}: "
                         "the ramp runs from the fast pairs (kept) to the slow ones")

    def pair_turning(turns: float) -> float:
        """The (fractional) pair that turns `turns` times over the original context."""
        return (d_rope * math.log(context / (turns * 2 * math.pi))
                / (2 * math.log(base)))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if boolean("truncate", truncate):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_rope - 1)
    if low == high:
        high += 0.001  # HF's guard against a zero-width ramp
    ramp = ((torch.arange(d_rope // 2, dtype=torch.float32) - low)
            / (high - low)).clamp(0, 1)  # 0: keep theta_i, 1: theta_i / factor
    powers = base ** (torch.arange(0, d_rope, 2).float() / d_rope)  # 1 / theta_i
    theta, interpolated = 1.0 / powers, 1.0 / (factor * powers)
    # theta_i (1 - ramp) + (theta_i / factor) ramp, in Hugging Face's float32 steps
    # (its weight is `keep`, and 1 - keep is not always ramp once rounded): the
    # frequencies then equal its bit for bit
    keep = 1 - ramp
    return interpolated * (1 - keep) + theta * keep


class YarnRotaryEmbedding(RotaryEmbedding):
    """Chapter 2's RotaryEmbedding with YaRN's frequencies (`yarn_inverse_frequencies`)
    and its cos and sin tables multiplied by `attention_factor` (HF's
    `attention_scaling`), in float32 as Hugging Face computes them. DeepSeek-V3's
    checkpoints: factor 40 over an original context of 4096, beta 32 and 1, and
    attention_factor 1 (its mscale and mscale_all_dim are equal; the softmax scale
    carries the correction instead, `deepseek_rope`)."""

    def __init__(self, d_head: int, *, base: float, factor: float,
                 original_context: int, beta_fast: float = 32.0,
                 beta_slow: float = 1.0, attention_factor: float = 1.0,
                 truncate: bool = True, layout: str = "half") -> None:
        super().__init__(d_head, base=base, layout=layout)
        self.yarn = {"factor": factor, "original_context": original_context,
                     "beta_fast": beta_fast, "beta_slow": beta_slow,
                     "truncate": truncate}
        yarn_inverse_frequencies(d_head, base=base, **self.yarn)  # checks the options
        self.attention_factor = positive_float("attention_factor", attention_factor)

    def tables(self, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin [>= length, d_head], float32, grown as chapter 2's are."""
        current = self.cos.shape[0]
        if length > current or self.cos.dtype != torch.float32:
            n = current if length <= current else max(length, 2 * current)
            device = self.cos.device
            inv_freq = yarn_inverse_frequencies(self.rotary_dim, base=self.base,
                                                **self.yarn).to(device)
            angles = torch.outer(torch.arange(n, device=device).float(), inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # [n, d_head]: both halves
            self.cos = angles.cos() * self.attention_factor
            self.sin = angles.sin() * self.attention_factor
            h = self.rotary_dim // 2
            self.signed_sin = torch.cat((-self.sin[:, :h], self.sin[:, h:]), dim=-1)
        return self.cos, self.sin

def yarn_settings(parameters: Mapping[str, object], max_positions: int) -> dict:
    """`YarnRotaryEmbedding`'s options from a config's YaRN `rope_parameters`, by
    Hugging Face's rules: the original context (else `max_positions`), the factor
    (else max_positions / original), betas 32 and 1 unless given, the ramp's ends
    rounded unless `truncate` is False, and the attention factor (given; else
    yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim) when both are
    set; else yarn_mscale(factor))."""
    if not isinstance(parameters, Mapping):
        raise TypeError(f"parameters must be a dict (rope_parameters), "
                        f"got {type(parameters).__name__}")
    given = {k: v for k, v in parameters.items() if v is not None}  # None: the default
    max_positions = positive_int("max_positions", max_positions)
    original = positive_int("rope_parameters['original_max_position_embeddings']",
                            given.get("original_max_position_embeddings",
                                      max_positions))
    factor = positive_float("rope_parameters['factor']",
                            given.get("factor", max_positions / original))
    mscale, mscale_all_dim = given.get("mscale"), given.get("mscale_all_dim")
    attention_factor = given.get("attention_factor")
    if attention_factor is None:
        attention_factor = (yarn_mscale(factor, mscale)
                            / yarn_mscale(factor, mscale_all_dim)
                            if mscale and mscale_all_dim else yarn_mscale(factor))
    return {"factor": factor, "original_context": original,
            "beta_fast": given.get("beta_fast", 32.0),
            "beta_slow": given.get("beta_slow", 1.0),
            "attention_factor": attention_factor,
            "truncate": given.get("truncate", True)}


def rope_settings(rope: RotaryEmbedding) -> dict:
    """What a RoPE computes with, to compare a built layer's with a config's: its kind,
    width, base and layout, and YaRN's options."""
    settings = {"kind": type(rope).__name__, "d_head": rope.d_head, "base": rope.base,
                "layout": rope.layout}
    if isinstance(rope, YarnRotaryEmbedding):
        settings |= rope.yarn | {"attention_factor": rope.attention_factor}
    return settings
# --8<-- [end:yarn]
