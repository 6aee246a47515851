"""Where is the token? Absolute and rotary position information.

Attention alone is permutation equivariant (chapter 1), so order must be put in:

* `sinusoidal_table`: the fixed table of Vaswani et al. 2017, sec. 3.5, added to the
  token embeddings (the 2017 encoder-decoder); `sinusoidal_shift` is the fixed matrix
  that moves every row of it by k positions;
* `LearnedPositions`: one trained vector per position, added likewise (GPT-1 and GPT-2,
  Radford et al. 2018, 2019), with a hard maximum length;
* RoPE (Su et al. 2021): queries and keys are rotated by an angle proportional to their
  position, inside attention, so that a score depends on positions only through their
  difference (GPT-J, GPT-NeoX, PaLM, Llama). Two layouts are in use:
  - *rotate-half* (GPT-NeoX, Hugging Face Llama): coordinate i is paired with i + d/2;
  - *interleaved* (the RoFormer paper, Meta's original Llama code, GPT-J): coordinate 2i
    is paired with 2i + 1.
  They are the same rotation up to a fixed permutation of the q/k projection rows
  (`interleaved_to_half_permutation`).

Shapes: B batch, T positions, d_model model width, d_head head width (even for RoPE).
"""

# Over 450 lines on purpose: chapter 2 in reading order, the tables, the rotations, the
# layer and the frequencies of longer contexts; the era files take its sections as a
# library, and split modules would import each other's checks.

from __future__ import annotations

import math
from numbers import Integral

import torch
from torch import Tensor, nn

from literate.parts.checks import (
    choice,
    features,
    float_dtype,
    float_tensor,
    non_negative_int,
    positive_float,
    positive_int,
)

__all__ = [
    "sinusoidal_table",
    "sinusoidal_shift",
    "LearnedPositions",
    "rope_cache",
    "rotate_half",
    "apply_rope",
    "apply_rope_interleaved",
    "interleaved_to_half_permutation",
    "ROPE_LAYOUTS",
    "RotaryEmbedding",
    "llama3_inverse_frequencies",
    "Llama3RotaryEmbedding",
]

# --8<-- [start:checks]
def even_int(name: str, value: object, *,
             why: str = "coordinates rotate in pairs") -> int:
    """`value` if it is a positive even int (bools refused); `why` goes in the error."""
    if positive_int(name, value) % 2:
        raise ValueError(f"{name} must be even: {why}; got {value}")
    return int(value)


def any_int(name: str, value: object) -> int:
    """`value` as an int of any sign (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


def base_above_one(name: str, value: object) -> float:
    """`value` if it is a finite real > 1, so that the frequencies base^(-2i/d)
    decrease from one pair to the next."""
    if positive_float(name, value) <= 1.0:
        raise ValueError(f"{name} must be > 1 (frequencies base^(-2i/d) must "
                         f"decrease), got {value}")
    return float(value)
# --8<-- [end:checks]


# --8<-- [start:sinusoidal_table]
# Why an odd width is refused, in the error message and on the page.
ODD_WIDTH_REASON = ("for an odd width the last sine has no cosine partner, so "
                    "PE[pos + k] would not be a rotation of PE[pos] in that coordinate")


def sinusoidal_table(
    length: int,
    d_model: int,
    *,
    base: float = 10_000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The fixed positional table `[length, d_model]` of Vaswani et al. 2017, sec. 3.5.

    PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(same angle): sines
    in the even coordinates, cosines in the odd ones, one frequency per pair (the
    paper's layout). `d_model` must be even (see ODD_WIDTH_REASON). Computed in float64,
    returned in `dtype`.
    """
    length = positive_int("length", length)
    d_model = even_int("d_model", d_model, why=ODD_WIDTH_REASON)
    base = base_above_one("base", base)
    dtype = float_dtype("dtype", dtype)
    pos = torch.arange(length, dtype=torch.float64, device=device)[:, None]  # [T, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64,
                         device=device)  # [d_model/2]
    angle = pos / base ** (two_i / d_model)  # [T, d_model/2]
    table = torch.empty(length, d_model, dtype=torch.float64, device=device)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.to(dtype)
# --8<-- [end:sinusoidal_table]


# --8<-- [start:sinusoidal_shift]
def sinusoidal_shift(k: int, d_model: int, *, base: float = 10_000.0) -> Tensor:
    """The fixed matrix R_k `[d_model, d_model]` with PE[pos + k] = R_k @ PE[pos].

    Pair i holds (sin a, cos a) with a = pos * w_i. Moving k positions adds b = k * w_i,
    and sin(a + b) = cos b sin a + sin b cos a, cos(a + b) = -sin b sin a + cos b cos a:
    a 2 x 2 rotation that depends on k, not on pos. R_k is these blocks on the diagonal,
    in float64. k may be negative (a shift towards position 0).
    """
    k = any_int("k", k)
    d_model = even_int("d_model", d_model, why=ODD_WIDTH_REASON)
    base = base_above_one("base", base)
    sin_at = torch.arange(0, d_model, 2)  # [d_model/2]: pair i's sine sits at 2i,
    cos_at = sin_at + 1  # and its cosine at 2i + 1
    b = k / base ** (sin_at.double() / d_model)  # [d_model/2]: how far pair i turns
    shift = torch.zeros(d_model, d_model, dtype=torch.float64)
    shift[sin_at, sin_at], shift[sin_at, cos_at] = torch.cos(b), torch.sin(b)
    shift[cos_at, sin_at], shift[cos_at, cos_at] = -torch.sin(b), torch.cos(b)
    return shift
# --8<-- [end:sinusoidal_shift]


# --8<-- [start:learned_positions]
class LearnedPositions(nn.Module):
    """One trained vector per position, added to the token embeddings.

    GPT-1 replaced the sinusoidal table with learned position embeddings (Radford et
    al. 2018, sec. 4.1) and GPT-2 kept them, for 1024 positions (Radford et al. 2019,
    sec. 2.3); this is Hugging Face `GPT2Model.wpe`. Unlike the table, there is no
    formula for a position that has no row: input that needs one is refused. `offset`
    is the position of the first token (the number of cached tokens when decoding).
    """

    def __init__(
        self,
        max_length: int,
        d_model: int,
        *,
        init_std: float = 0.02,  # GPT-2's initializer_range
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.max_length = positive_int("max_length", max_length)
        self.d_model = positive_int("d_model", d_model)
        init_std = positive_float("init_std", init_std)
        dtype = float_dtype("dtype", dtype)
        self.embedding = nn.Embedding(self.max_length, self.d_model, dtype=dtype,
                                      device=device)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=init_std)

    def forward(self, x: Tensor, *, offset: int = 0,
                positions: Tensor | None = None) -> Tensor:
        """x `[B, T, d_model]` token embeddings -> x + P[offset : offset + T], or
        x + P[positions] with `positions` [B, T]: each row's own (left padding,
        chapter 8), each < offset + T, so the length check above covers them."""
        if features("x", x, width=self.d_model, like=self.embedding.weight).ndim != 3:
            raise ValueError(f"x must be [B, T, d_model], got {tuple(x.shape)}")
        t = x.shape[1]
        if non_negative_int("offset", offset) + t > self.max_length:
            raise ValueError(f"x [B, T, d] must have offset + T <= max_length="
                             f"{self.max_length} (no vector for a position never "
                             f"trained), got offset={offset} and x {tuple(x.shape)}")
        if positions is None:
            positions = torch.arange(offset, offset + t, device=x.device)  # [T]
        elif not isinstance(positions, Tensor) or positions.dtype != torch.long:
            raise TypeError("positions must be a torch.long tensor [B, T]")
        elif positions.shape != x.shape[:2]:
            raise ValueError(f"positions must be [B, T] = {list(x.shape[:2])}, "
                             f"got {list(positions.shape)}")
        return x + self.embedding(positions)  # + [T, d_model] or [B, T, d_model]
# --8<-- [end:learned_positions]


# --8<-- [start:rope_cache]
def rope_cache(
    length: int,
    d_head: int,
    *,
    base: float = 10_000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables `[length, d_head]` for RoPE, rotate-half layout.

    Pair i (coordinates i and i + d_head/2) turns by angle pos * theta_i with
    theta_i = base^(-2i/d_head) (Su et al. 2021, sec. 3.2.2). Each half of a row holds
    the same d_head/2 angles, so `x * cos + rotate_half(x) * sin` rotates every pair at
    once.
    The angles are computed in float32, as Hugging Face's `LlamaRotaryEmbedding` does
    (so the tables match it exactly), then cast to `dtype`.
    """
    length = positive_int("length", length)
    d_head = even_int("d_head", d_head)
    base = base_above_one("base", base)
    dtype = float_dtype("dtype", dtype)
    pair = torch.arange(0, d_head, 2, dtype=torch.int64, device=device)  # 2i
    exponent = pair.float() / d_head
    inv_freq = 1.0 / (base**exponent)  # [d_head/2], float32
    pos = torch.arange(length, dtype=torch.int64, device=device).float()  # [T]
    angles = torch.outer(pos, inv_freq)  # [T, d_head/2]
    angles = torch.cat((angles, angles), dim=-1)  # [T, d_head]: both halves of a pair
    return angles.cos().to(dtype), angles.sin().to(dtype)
# --8<-- [end:rope_cache]


# --8<-- [start:rotate_half]
def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last axis: a quarter turn of
    every pair (i, i + d/2)."""
    if float_tensor("x", x).ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"x must have an even last axis, got {tuple(x.shape)}")
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)
# --8<-- [end:rotate_half]


# --8<-- [start:check_rope]
def check_rope(x: object, cos: object, sin: object, offset: object,
               positions: object = None) -> slice | Tensor:
    """What `apply_rope` refuses: x [..., T, d_head] with an even d_head, cos and sin
    [length, d_head] alike, an int offset >= 0 with offset + T <= length; `positions`,
    if given, [B, T] ints for x [B, H, T, d_head]. Returns the table rows to read:
    offset .. offset + T - 1, or `positions` (each row its own, chapter 8)."""
    if float_tensor("x", x).ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"x must be [..., T, d_head], d_head even, "
                         f"got {tuple(x.shape)}")
    t, d, offset = x.shape[-2], x.shape[-1], non_negative_int("offset", offset)
    if float_tensor("cos", cos, ndim=2).shape != float_tensor("sin", sin).shape \
            or cos.shape[1] != d or offset + t > cos.shape[0]:
        raise ValueError(f"positions {offset}..{offset + t - 1} of width {d} need cos "
                         f"and sin [>= {offset + t}, {d}], got {tuple(cos.shape)}, "
                         f"{tuple(sin.shape)}")
    if positions is None:
        return slice(offset, offset + t)
    if not isinstance(positions, Tensor) or positions.dtype != torch.long:
        raise TypeError("positions must be a torch.long tensor [B, T]")
    if x.ndim != 4 or positions.shape != (x.shape[0], t):
        raise ValueError(f"positions must be [B, T] for x [B, H, T, d_head], got "
                         f"{tuple(positions.shape)} for x {tuple(x.shape)}")
    return positions[:, None]  # [B, 1, T]: one row of angles per token, every head
# --8<-- [end:check_rope]


# --8<-- [start:apply_rope]
def turn_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """RoPE's rotation of x [..., T, d] by rows of the tables already read and cast
    ([T, d], or [B, 1, T, d] per row), rotate-half layout; unchecked."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin  # x cos + rotate_half(x) sin


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, *, offset: int = 0,
               positions: Tensor | None = None) -> Tensor:
    """Rotate queries or keys `x [..., T, d_head]` to positions offset .. offset+T-1.

    Rotate-half layout (GPT-NeoX, Hugging Face Llama). Apply it to q and k only, never
    to v: the rotation is there to make q.k depend on the positions' difference, and
    values do not enter the score. `offset` is the absolute position of the first row
    (the number of cached tokens when decoding); `positions` [B, T] gives each row of
    a batch its own instead (a left-padded batch, chapter 8). The tables are cast to
    x's dtype and device, so a float32 cache serves float64 inputs in float64 and
    bfloat16 inputs in bfloat16.
    """
    rows = check_rope(x, cos, sin, offset, positions)
    cos = cos[rows].to(dtype=x.dtype, device=x.device)  # [T, d] or [B, 1, T, d]
    sin = sin[rows].to(dtype=x.dtype, device=x.device)
    return turn_half(x, cos, sin)
# --8<-- [end:apply_rope]


# --8<-- [start:apply_rope_interleaved]
def turn_interleaved(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The rotation in the interleaved layout, by rows [..., T, d/2]; unchecked."""
    even, odd = x[..., 0::2], x[..., 1::2]  # [..., T, d/2] each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)  # [..., T, d]


def apply_rope_interleaved(x: Tensor, cos: Tensor, sin: Tensor, *, offset: int = 0,
                           positions: Tensor | None = None) -> Tensor:
    """The same rotation in the interleaved layout (RoFormer paper, Meta's original
    code): coordinates (2i, 2i+1) form pair i. Takes the rotate-half tables of
    `rope_cache`."""
    rows, half = check_rope(x, cos, sin, offset, positions), x.shape[-1] // 2
    cos = cos[rows][..., :half].to(dtype=x.dtype, device=x.device)  # [..., T, d/2]
    sin = sin[rows][..., :half].to(dtype=x.dtype, device=x.device)
    return turn_interleaved(x, cos, sin)
# --8<-- [end:apply_rope_interleaved]


# --8<-- [start:rotary_embedding]
ROPE_LAYOUTS = ("half", "interleaved")


class RotaryEmbedding(nn.Module):
    """RoPE as a part of an attention layer: rotates the first `rotary_dim` coordinates
    of every head (all of them by default; GPT-J and GPT-NeoX turn only a slice) at
    their absolute positions, in the rotate-half layout (GPT-NeoX, Llama) or the
    interleaved one (RoFormer, GPT-J, Cohere); the rest pass through. The cos and sin
    tables are float32 buffers, made at the first call and again only for a longer
    input (then twice as long) or after `.to()` changed their dtype.
    """

    def __init__(self, d_head: int, *, base: float = 10_000.0,
                 rotary_dim: int | None = None, layout: str = "half") -> None:
        super().__init__()
        self.d_head = positive_int("d_head", d_head)
        if rotary_dim is None:  # the whole head turns: its width must be even
            rotary_dim = even_int("d_head", d_head)
        elif even_int("rotary_dim", rotary_dim) > d_head:
            raise ValueError(f"rotary_dim={rotary_dim} must be <= d_head={d_head}")
        self.rotary_dim, self.base = rotary_dim, base_above_one("base", base)
        self.layout = choice("layout", layout, ROPE_LAYOUTS)
        self.register_buffer("cos", torch.zeros(0, rotary_dim), persistent=False)
        self.register_buffer("sin", torch.zeros(0, rotary_dim), persistent=False)
        # [-sin, sin] over the two halves: rotate_half(x) * sin == roll(x) * this
        self.register_buffer("signed_sin", torch.zeros(0, rotary_dim), persistent=False)

    def tables(self, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin [>= length, rotary_dim], float32 (cast at use, as HF does)."""
        current = self.cos.shape[0]
        if length > current or self.cos.dtype != torch.float32:
            n = current if length <= current else max(length, 2 * current)
            self.cos, self.sin = rope_cache(n, self.rotary_dim, base=self.base,
                                            device=self.cos.device)
            h = self.rotary_dim // 2
            self.signed_sin = torch.cat((-self.sin[:, :h], self.sin[:, h:]), dim=-1)
        return self.cos, self.sin

    def forward(self, x: Tensor, *, offset: int = 0,
                positions: Tensor | None = None) -> Tensor:
        """x [..., T, d_head] at positions offset .. offset + T - 1 -> rotated x.
        `positions` [B, T]: each row's own positions, each < offset + T (left padding
        only lowers them), so the tables cover them without reading their values."""
        return self.pair(x, None, offset=offset, positions=positions)[0]

    def pair(self, q: Tensor, k: Tensor | None, *, offset: int = 0,
             positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """q and k (None: q alone), [..., T, d_head] each, turned to the same
        positions, the tables read and cast once for both (what a layer calls at
        every step). Rotate-half as `x * cos + roll(x, r/2) * [-sin, sin]`: the very
        products of `apply_rope`'s `x * cos + rotate_half(x) * sin`, one op fewer."""
        for name, x in (("q", q), ("k", k)):
            if x is not None and (float_tensor(name, x).ndim < 2
                                  or x.shape[-1] != self.d_head):
                raise ValueError(f"{name} must be [..., T, d_head={self.d_head}], "
                                 f"got {tuple(x.shape)}")
        t, r = q.shape[-2], self.rotary_dim
        offset = non_negative_int("offset", offset)
        cos, sin = self.tables(offset + t)
        if positions is None:
            rows = slice(offset, offset + t)
        else:
            rows = check_rope(q[..., :r], cos, sin, offset, positions)  # [B, 1, T]
        cos = cos[rows].to(dtype=q.dtype, device=q.device)  # [T, r] or [B, 1, T, r]
        if self.layout == "half":
            sin = self.signed_sin[rows].to(dtype=q.dtype, device=q.device)

            def turn(x: Tensor) -> Tensor:
                return x * cos + x.roll(r // 2, dims=-1) * sin
        else:
            sin = sin[rows].to(dtype=q.dtype, device=q.device)
            cos, sin = cos[..., :r // 2], sin[..., :r // 2]

            def turn(x: Tensor) -> Tensor:
                return turn_interleaved(x, cos, sin)

        def rotate(x: Tensor) -> Tensor:
            if r == self.d_head:
                return turn(x)
            return torch.cat((turn(x[..., :r]), x[..., r:]), dim=-1)

        return rotate(q), None if k is None else rotate(k)
# --8<-- [end:rotary_embedding]


# --8<-- [start:interleaved_to_half_permutation]
def interleaved_to_half_permutation(d_head: int) -> Tensor:
    """Index `p` with `x_half = x_interleaved[..., p]`: (0, 2, 4, ..., 1, 3, 5, ...).

    Apply it to the rows of each head's q and k projection weights to convert a
    checkpoint from the interleaved layout to rotate-half: scores stay identical.
    """
    d_head = even_int("d_head", d_head)
    return torch.cat((torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)))
# --8<-- [end:interleaved_to_half_permutation]


# --8<-- [start:llama3_rope]
def llama3_inverse_frequencies(d_rope: int, *, base: float, factor: float,
                               low_freq_factor: float, high_freq_factor: float,
                               original_context: int) -> Tensor:
    """Llama 3.1's RoPE frequencies [d_rope / 2] for a context longer than training
    (Hugging Face's rope_type "llama3"), in its float32 steps. A pair whose wavelength
    2 pi / theta_i is shorter than original_context / high_freq_factor keeps theta_i
    (it turns many times within the trained context); one longer than
    original_context / low_freq_factor is divided by `factor` (as linear
    interpolation would); in between, theta_i is mixed with theta_i / factor, linearly
    in original_context / wavelength. Llama 3.1 and 3.2: factor 8 (32 for 3.2), 1 and
    4 over 8,192 positions."""
    d_rope = even_int("d_rope", d_rope)
    base = base_above_one("base", base)
    factor = positive_float("factor", factor)
    low = positive_float("low_freq_factor", low_freq_factor)
    high = positive_float("high_freq_factor", high_freq_factor)
    if not low < high:
        raise ValueError(f"low_freq_factor={low_freq_factor} must be below "
                         f"high_freq_factor={high_freq_factor}")
    original = positive_int("original_context", original_context)
    pair = torch.arange(0, d_rope, 2, dtype=torch.int64).float()  # 2i
    theta = 1.0 / (base ** (pair / d_rope))  # [d_rope / 2], float32
    wavelength = 2 * math.pi / theta
    divided = torch.where(wavelength > original / low, theta / factor, theta)
    smooth = (original / wavelength - low) / (high - low)  # 0 -> 1 across the band
    mixed = (1 - smooth) * divided / factor + smooth * divided
    between = ~(wavelength < original / high) * ~(wavelength > original / low)
    return torch.where(between, mixed, divided)


class Llama3RotaryEmbedding(RotaryEmbedding):
    """RotaryEmbedding with Llama 3.1's frequencies (`llama3_inverse_frequencies`),
    its cos and sin tables grown as chapter 2's are."""

    def __init__(self, d_head: int, *, base: float, factor: float,
                 low_freq_factor: float, high_freq_factor: float,
                 original_context: int) -> None:
        super().__init__(d_head, base=base)
        self.llama3 = {"factor": factor, "low_freq_factor": low_freq_factor,
                       "high_freq_factor": high_freq_factor,
                       "original_context": original_context}
        llama3_inverse_frequencies(d_head, base=base, **self.llama3)  # checks them

    def tables(self, length: int) -> tuple[Tensor, Tensor]:
        """cos and sin [>= length, d_head], float32."""
        current = self.cos.shape[0]
        if length > current or self.cos.dtype != torch.float32:
            n = current if length <= current else max(length, 2 * current)
            device = self.cos.device
            inv_freq = llama3_inverse_frequencies(self.rotary_dim, base=self.base,
                                                  **self.llama3).to(device)
            angles = torch.outer(torch.arange(n, device=device).float(), inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # [n, d_head]: both halves
            self.cos, self.sin = angles.cos(), angles.sin()
            h = self.rotary_dim // 2
            self.signed_sin = torch.cat((-self.sin[:, :h], self.sin[:, h:]), dim=-1)
        return self.cos, self.sin
# --8<-- [end:llama3_rope]
