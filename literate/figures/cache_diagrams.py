"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

"cache-buffers" (chapter 8): the slots of one layer's preallocated KV cache for a batch
of two rows, one of them left-padded, after a prefill and two decoding steps. Nothing
of it is typed: `cache_walk` runs a real attention layer into a real `DecodeCache` and
the figure draws what the cache holds (`next_pos`, the written slots, the padding flags),
the positions `advance` gave each token and the keys the last query gave a weight.
"""

# Over 450 lines on purpose: chapter 8's four diagrams, each with its English
# and Russian labels and the run of the page's cache, model or beam search it reads its
# numbers from; the draw functions share the module's slot-grid helpers.

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from literate.figures.style import BOX_INK, style, text
from literate.parts.cache import DecodeCache
from literate.parts.multi_head import MultiHeadAttention

# The example: two prompts of 5 and 3 tokens, the short one left-padded to 5, then two
# decoding steps, in a cache of 8 slots.
CAPACITY = 8
PROMPT_LENGTHS = (5, 3)
DECODE_STEPS = 2


@dataclass(frozen=True)
class CacheWalk:
    """What one layer's cache holds after the example's calls, read from the objects.

    Per row and slot [B][capacity]: `written`, the slot holds a key and a value (a
    nonzero row of the buffers); `valid`, the cache's flag (False: padding, slots >=
    next_pos count as not written, not as padding); `position`, the position `advance`
    gave the slot's token (None for padding and unwritten slots); `reads`, the last
    call's query gave the key a weight > 0 (False from next_pos on)."""

    shape: tuple[int, ...]  # of each buffer, [B, H_kv, capacity, d_head]
    next_pos_after: tuple[int, ...]  # cache.next_pos after each call
    written: tuple[tuple[bool, ...], ...]
    valid: tuple[tuple[bool, ...], ...]
    position: tuple[tuple[int | None, ...], ...]
    reads: tuple[tuple[bool, ...], ...]

    @property
    def next_pos(self) -> int:
        return self.next_pos_after[-1]

    @property
    def prefill(self) -> int:
        """The slots the prompt filled: next_pos after the first call."""
        return self.next_pos_after[0]


def cache_walk() -> CacheWalk:
    """A GQA layer (2 query heads, 1 key/value head, RoPE) run as `cached_run` runs each
    block: `DecodeCache.advance` gives the padding flags and positions, the layer writes
    its keys into the cache. Prefill of the left-padded prompts, then DECODE_STEPS
    steps of one token each; fixed seed, the global random state left as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = MultiHeadAttention(d_model=8, n_heads=2, n_kv_heads=1, rope=True)
        layer = layer.double()
        t0 = max(PROMPT_LENGTHS)
        x = torch.randn(len(PROMPT_LENGTHS), t0 + DECODE_STEPS, 8, dtype=torch.float64)
    lengths = torch.tensor(PROMPT_LENGTHS)
    prompt_valid = torch.arange(t0) >= t0 - lengths[:, None]  # [B, T0]: pads first
    cache = DecodeCache([layer.new_cache(batch=len(PROMPT_LENGTHS), capacity=CAPACITY)])
    calls = [(x[:, :t0], prompt_valid)]
    calls += [(x[:, t : t + 1], None) for t in range(t0, t0 + DECODE_STEPS)]
    position = [[None] * CAPACITY for _ in PROMPT_LENGTHS]
    after = []
    with torch.no_grad():
        for chunk, flags in calls:
            start = cache.next_pos
            key_valid, positions = cache.advance(chunk.shape[1], flags)
            _, weights = layer(
                chunk,
                causal=True,
                key_valid=key_valid,
                cache=cache.layers[0],
                positions=positions,
                empty_row="zero",
                return_weights=True,
            )  # weights [B, H, T, next_pos]
            for b, row in enumerate(positions.tolist()):
                for s, pos in enumerate(row, start=start):
                    position[b][s] = pos if bool(key_valid[b, s]) else None
            after.append(cache.next_pos)
    kv = cache.layers[0]
    n = cache.next_pos
    written = (kv.k != 0).any(dim=-1).any(dim=1) & (kv.v != 0).any(dim=-1).any(dim=1)
    valid = cache.valid.clone()
    valid[:, n:] = True  # beyond next_pos a flag means nothing yet
    reads = torch.zeros_like(valid)
    reads[:, :n] = (weights[:, :, -1] > 0).any(dim=1)  # the last query, any head
    rows = range(len(PROMPT_LENGTHS))
    return CacheWalk(
        shape=tuple(kv.k.shape),
        next_pos_after=tuple(after),
        written=tuple(tuple(written[b].tolist()) for b in rows),
        valid=tuple(tuple(valid[b].tolist()) for b in rows),
        position=tuple(tuple(position[b]) for b in rows),
        reads=tuple(tuple(reads[b].tolist()) for b in rows),
    )


def slot_kind(walk: CacheWalk, b: int, s: int) -> str:
    """How slot s of row b is drawn: "prompt", "decoded", "pad" or "empty"."""
    if not walk.written[b][s]:
        return "empty"
    if not walk.valid[b][s]:
        return "pad"
    return "prompt" if s < walk.prefill else "decoded"


def read_span(walk: CacheWalk, b: int) -> tuple[int, int]:
    """The first and last slot row b's last query reads (they are contiguous)."""
    slots = [s for s, r in enumerate(walk.reads[b]) if r]
    return slots[0], slots[-1]


BUFFER_LABELS = {
    "en": {
        "title": "One layer's KV cache: batch {b}, capacity {cap}",
        "subtitle": "K and V alike: each one buffer {shape}, written in place",
        "slot": "slot",
        "row": "row {b}",
        "pad": "pad",
        "next_pos": "next_pos = {n}: the next token's slot",
        "reads": "its last query reads slots {lo}–{hi}",
        "reads_padded": "reads slots {lo}–{hi}; padding masked",
        "legend": (
            "prompt: prefill, one call",
            "decoded: one slot per step",
            "padding: written, masked out",
            "not written yet",
        ),
        "note": "In a slot: its token's position, counting real tokens only",
    },
    "ru": {
        "title": "KV-кеш одного слоя: батч {b}, ёмкость {cap}",
        "subtitle": "K и V одинаково: по буферу {shape}, запись на месте",
        "slot": "слот",
        "row": "строка {b}",
        "pad": "пад",
        "next_pos": "next_pos = {n}: слот следующего токена",
        "reads": "её последний запрос читает слоты {lo}–{hi}",
        "reads_padded": "читает слоты {lo}–{hi}; паддинг скрыт",
        "legend": (
            "промпт: префилл, один вызов",
            "декодирование: слот за шаг",
            "паддинг: записан, но скрыт",
            "ещё не записан",
        ),
        "note": "В слоте — позиция его токена: считаются только настоящие токены",
    },
}

CELL_H = 0.8  # a slot's height; a slot is 1 wide
ROW_STEP = 1.75  # from one row's slots to the next's: the slots, then the reads


def buffers_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """The slots of `cache_walk` as a grid, one row per batch row, one column per slot:
    coloured by `slot_kind`, each real token's position written in, an arrow at
    next_pos, and under each row the span of slots its last query reads."""
    t = text(BUFFER_LABELS, language)
    walk = cache_walk()
    batch, _, capacity, _ = walk.shape
    width, left, right = 5.2, -1.75, capacity + 0.1
    per_inch = (right - left) / width  # data units per inch, equal in x and y
    top = 3.75  # title, subtitle, next_pos, slot numbers above y = 0
    bottom = -(batch - 1) * ROW_STEP - CELL_H - 2.45  # reads, legend, note
    height = (top - bottom) / per_inch
    with style(theme) as p:
        fill = {
            "prompt": p.series[0],
            "decoded": p.series[2],
            "pad": p.empty,
            "empty": "none",
        }
        edge = {"prompt": "none", "decoded": "none", "pad": p.border, "empty": p.muted}
        fig = plt.figure(figsize=(width, height))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_axis_off()
        ax.text(
            left + 0.1,
            top - 0.15,
            t["title"].format(b=batch, cap=capacity),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="top",
        )
        shape = "[" + ", ".join(str(n) for n in walk.shape) + "]"
        ax.text(
            left + 0.1,
            top - 0.75,
            t["subtitle"].format(shape=shape),
            fontsize=10,
            color=p.muted,
            va="top",
        )
        # The slot numbers, and next_pos pointing at its slot
        ax.text(
            -0.15, 0.35, t["slot"], fontsize=10, color=p.muted, ha="right", va="center"
        )
        for s in range(capacity):
            ax.text(
                s + 0.5,
                0.35,
                str(s),
                fontsize=10,
                color=p.muted,
                ha="center",
                va="center",
            )
        n = walk.next_pos
        ax.text(
            right,
            1.75,
            t["next_pos"].format(n=n),
            fontsize=10,
            color=p.ink,
            ha="right",
            va="center",
            fontweight="bold",
        )
        ax.add_patch(
            FancyArrowPatch(
                (n + 0.5, 1.5),
                (n + 0.5, 0.65),
                arrowstyle="-|>",
                mutation_scale=12,
                color=p.ink,
                lw=1.4,
                gid=f"cache-next-pos-{n}",
            )
        )
        for b in range(batch):
            y = -CELL_H - b * ROW_STEP  # the bottom of row b's slots
            ax.text(
                -0.15,
                y + CELL_H / 2,
                t["row"].format(b=b),
                fontsize=10,
                color=p.ink,
                ha="right",
                va="center",
            )
            for s in range(capacity):
                kind = slot_kind(walk, b, s)
                ax.add_patch(
                    Rectangle(
                        (s + 0.04, y),
                        0.92,
                        CELL_H,
                        facecolor=fill[kind],
                        edgecolor=edge[kind],
                        lw=1.0,
                        linestyle="--" if kind == "empty" else "-",
                        gid=f"cache-{kind}-{b}-{s}",
                    )
                )
                pos = walk.position[b][s]
                label = t["pad"] if kind == "pad" else "" if pos is None else str(pos)
                ax.text(
                    s + 0.5,
                    y + CELL_H / 2,
                    label,
                    fontsize=11 if label.isdigit() else 10,
                    ha="center",
                    va="center",
                    color=p.muted if kind == "pad" else BOX_INK,
                )
            lo, hi = read_span(walk, b)
            ybar = y - 0.25
            ax.plot(
                [lo + 0.06, hi + 0.94],
                [ybar, ybar],
                color=p.ink,
                lw=1.3,
                solid_capstyle="butt",
                gid=f"cache-reads-{b}-{lo}-{hi}",
            )
            for xe in (lo + 0.06, hi + 0.94):
                ax.plot([xe, xe], [ybar, ybar + 0.15], color=p.ink, lw=1.3)
            padded = not all(walk.valid[b][:n])
            ax.text(
                (lo + hi + 1) / 2,
                ybar - 0.1,
                t["reads_padded" if padded else "reads"].format(lo=lo, hi=hi),
                fontsize=10,
                color=p.ink,
                ha="center",
                va="top",
            )
        kinds = ("prompt", "decoded", "pad", "empty")
        handles = [
            Patch(
                facecolor=fill[k],
                edgecolor=edge[k],
                linestyle="--" if k == "empty" else "-",
                label=label,
            )
            for k, label in zip(kinds, t["legend"], strict=True)
        ]
        legend_top = -CELL_H - (batch - 1) * ROW_STEP - 0.95
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=2,
            fontsize=10,
            bbox_to_anchor=(left + 0.05, legend_top),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.4,
            columnspacing=1.0,
            labelcolor=p.ink,
        )
        ax.text(
            left + 0.1,
            bottom + 0.12,
            t["note"],
            fontsize=10,
            color=p.muted,
            va="bottom",
        )
    return fig


# ---------------------------------------------------------------------------------------
# "cache-model" (chapter 8, "A cache for a whole model"): one cache per block, in step.

MODEL_PROMPT = (1, 2, 3, 4)  # the page's prompt
MODEL_STEPS = 2  # one-token calls after the prefill
MODEL_CAPACITY = 8


@dataclass(frozen=True)
class ModelWalk:
    """A whole model's `DecodeCache` after a prefill and MODEL_STEPS greedy steps.

    `tokens`: the tokens fed, slot by slot, then the one the last logits choose;
    `wrote[l][c]`: the slots call c changed in layer l's keys and values;
    `next_pos_after[c]`: the cache's next_pos after call c; `shape`: each buffer's."""

    shape: tuple[int, ...]
    n_layers: int
    tokens: tuple[int, ...]
    wrote: tuple[tuple[tuple[int, ...], ...], ...]
    next_pos_after: tuple[int, ...]


def model_walk() -> ModelWalk:
    """The page's tiny minimal Llama (seed 0, 2 layers, 2 key/value heads of width 8),
    its weights in the hardened `llama_model`, run by `cached_run` into a `DecodeCache`
    of one `KVCache` per block: the prompt in one call, then greedy tokens one per call.
    Each call's written slots are read from the buffers (what changed)."""
    from literate.decoding.generate import cached_run, new_decode_cache
    from literate.minimal.llama import LlamaModel
    from literate.models.llama import llama_model

    sizes = dict(
        vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        minimal = LlamaModel(**sizes)
        model = llama_model(context=32, **sizes)
    model.load_state_dict(minimal.state_dict())
    model = model.double().eval()
    cache = new_decode_cache(model, batch=1, capacity=MODEL_CAPACITY)
    ids = torch.tensor([MODEL_PROMPT])
    tokens = list(MODEL_PROMPT)
    wrote: list[list[tuple[int, ...]]] = [[] for _ in cache.layers]
    after = []
    with torch.no_grad():
        for _ in range(MODEL_STEPS + 1):
            before = [(c.k.clone(), c.v.clone()) for c in cache.layers]
            logits = cached_run(model, ids, cache, last=True)
            for layer, c, (k, v) in zip(wrote, cache.layers, before, strict=True):
                moved = ((c.k != k) | (c.v != v)).any(dim=-1).any(dim=1)[0]
                layer.append(tuple(moved.nonzero().flatten().tolist()))
            after.append(cache.next_pos)
            ids = logits.argmax(dim=-1, keepdim=True)  # [1, 1]
            tokens.append(int(ids))
    return ModelWalk(
        shape=tuple(cache.layers[0].k.shape),
        n_layers=len(cache.layers),
        tokens=tuple(tokens),
        wrote=tuple(tuple(w) for w in wrote),
        next_pos_after=tuple(after),
    )


MODEL_LABELS = {
    "en": {
        "title": "A model's cache: one KVCache per block",
        "subtitle": "each layer's K and V: {shape}; slot t holds token t in all",
        "tokens": "tokens",
        "slot": "slot",
        "layer": "block {i}: K, V",
        "chosen": "chosen",
        "calls": (
            "call 1: the prompt, slots {lo}–{hi}",
            "call {c}: token {tok}, slot {s}",
        ),
        "next": "next_pos = {n}:\nthe logits of call {c}\nchose {tok}, its slot",
    },
    "ru": {
        "title": "Кеш модели: по KVCache на блок",
        "subtitle": "K и V каждого слоя: {shape}; в слоте t — токен t",
        "tokens": "токены",
        "slot": "слот",
        "layer": "блок {i}: K, V",
        "chosen": "выбран",
        "calls": (
            "вызов 1: промпт, слоты {lo}–{hi}",
            "вызов {c}: токен {tok}, слот {s}",
        ),
        "next": "next_pos = {n}:\nлогиты вызова {c}\nвыбрали {tok}, его слот",
    },
}


def _cell(ax, x, y, w, h, label, *, face, edge="none", ink=BOX_INK, gid=None, ls="-"):
    """A box of w x h at (x, y) with its label centred, font 10 or 11 (digits)."""
    ax.add_patch(
        Rectangle(
            (x, y), w, h, facecolor=face, edgecolor=edge, lw=1.0, linestyle=ls, gid=gid
        )
    )
    if label:
        size = 11 if label.isdigit() else 10
        ax.text(
            x + w / 2,
            y + h / 2,
            label,
            fontsize=size,
            color=ink,
            ha="center",
            va="center",
        )


def model_cache_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`model_walk` as a grid: the tokens above, one row of slots per block's cache,
    each slot coloured by the call that wrote it, the same slots in every block."""
    t = text(MODEL_LABELS, language)
    walk = model_walk()
    cap = walk.shape[2]
    calls = len(walk.next_pos_after)
    width, left, right = 5.2, -2.6, cap + 0.05
    per_inch = (right - left) / width
    top, bottom = 3.3, -walk.n_layers * 1.0 - 1.6
    with style(theme) as p:
        colour = [p.series[0], p.series[2], p.series[1], p.series[3]]
        fig = plt.figure(figsize=(width, (top - bottom) / per_inch))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_axis_off()
        ax.text(
            left + 0.1,
            top - 0.1,
            t["title"],
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="top",
        )
        shape = "[" + ", ".join(str(n) for n in walk.shape) + "]"
        ax.text(
            left + 0.1,
            top - 0.7,
            t["subtitle"].format(shape=shape),
            fontsize=10,
            color=p.muted,
            va="top",
        )
        ax.text(
            -0.15, 1.95, t["slot"], fontsize=10, color=p.muted, ha="right", va="center"
        )
        for s in range(cap):
            ax.text(
                s + 0.5,
                1.95,
                str(s),
                fontsize=10,
                color=p.muted,
                ha="center",
                va="center",
            )
        # which call wrote each slot: from block 0 (the test checks every block agrees)
        call_of = {s: c for c, slots in enumerate(walk.wrote[0]) for s in slots}
        n = walk.next_pos_after[-1]
        ax.text(
            -0.15, 1.1, t["tokens"], fontsize=10, color=p.ink, ha="right", va="center"
        )
        for s, tok in enumerate(walk.tokens):
            if s < n:
                _cell(
                    ax,
                    s + 0.04,
                    0.75,
                    0.92,
                    0.7,
                    str(tok),
                    face="none",
                    edge=colour[call_of[s]],
                    ink=p.ink,
                    gid=f"model-token-{s}-{tok}",
                )
            else:
                _cell(
                    ax,
                    s + 0.04,
                    0.75,
                    0.92,
                    0.7,
                    str(tok),
                    face="none",
                    edge=p.muted,
                    ink=p.ink,
                    ls="--",
                    gid=f"model-chosen-{s}-{tok}",
                )
        for i in range(walk.n_layers):
            y = -0.2 - i * 1.0
            ax.text(
                -0.15,
                y + 0.35,
                t["layer"].format(i=i),
                fontsize=10,
                color=p.ink,
                ha="right",
                va="center",
            )
            for s in range(cap):
                written = [c for c in range(calls) if s in walk.wrote[i][c]]
                if written:
                    c = written[-1]
                    _cell(
                        ax,
                        s + 0.04,
                        y,
                        0.92,
                        0.7,
                        "",
                        face=colour[c],
                        gid=f"model-slot-{i}-{s}-call-{c}",
                    )
                else:
                    _cell(
                        ax,
                        s + 0.04,
                        y,
                        0.92,
                        0.7,
                        "",
                        face="none",
                        edge=p.muted,
                        ls="--",
                        gid=f"model-slot-{i}-{s}-empty",
                    )
        y_last = -0.2 - (walk.n_layers - 1) * 1.0
        ax.add_patch(
            FancyArrowPatch(
                (n + 0.5, 0.72),
                (n + 0.5, y_last + 0.05),
                arrowstyle="-|>",
                mutation_scale=12,
                color=p.ink,
                lw=1.4,
                gid=f"model-next-pos-{n}",
            )
        )
        ys = y_last - 0.45
        first = walk.wrote[0][0]
        lines = [t["calls"][0].format(lo=first[0], hi=first[-1])]
        for c in range(1, calls):
            (s,) = walk.wrote[0][c]
            lines.append(t["calls"][1].format(c=c + 1, tok=walk.tokens[s], s=s))
        handles = [
            Patch(facecolor=colour[c], label=line) for c, line in enumerate(lines)
        ]
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=1,
            fontsize=10,
            bbox_to_anchor=(left + 0.05, ys),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.4,
            labelcolor=p.ink,
            frameon=False,
        )
        ax.text(
            right,
            ys,
            t["next"].format(n=n, c=calls, tok=walk.tokens[n]),
            fontsize=10,
            color=p.ink,
            ha="right",
            va="top",
        )
    return fig


# ---------------------------------------------------------------------------------------
# "cache-padding-sides" (chapter 8, "Batches of different lengths"): where the padding
# goes decides which logits choose each row's next token.

SIDES_LENGTHS = (6, 4, 2)  # the page's three prompts


@dataclass(frozen=True)
class SidesWalk:
    """The three prompts padded on each side (0 = padding id), and each row's next token
    chosen greedily: after a left-padded prefill, after a right-padded one (read in the
    last column), and for the prompt alone."""

    left_ids: tuple[tuple[int, ...], ...]
    right_ids: tuple[tuple[int, ...], ...]
    left_valid: tuple[tuple[bool, ...], ...]
    left_next: tuple[int, ...]
    right_next: tuple[int, ...]
    alone_next: tuple[int, ...]


def sides_model():
    """A tiny Llama (seed 2; weights of std 0.2 so that its choices depend on the
    context) and three prompts of ids 3 .. 63, padded on the left."""
    from literate.models.llama import llama_model

    with torch.random.fork_rng():
        torch.manual_seed(2)
        model = llama_model(
            vocab_size=64,
            context=32,
            d_model=32,
            n_heads=4,
            n_kv_heads=2,
            n_layers=2,
            d_ff=64,
            std=0.2,
        )
        ids = torch.randint(3, 64, (len(SIDES_LENGTHS), max(SIDES_LENGTHS)))
    return model.double().eval(), ids


def sides_walk() -> SidesWalk:
    """As the page's claim `decoding.right-padding-reads-a-pad` runs it: `cached_run`
    with the flags of each side, `last=True` (the last column's logits), argmax; and
    `generate` on each prompt alone for one token."""
    from literate.decoding.generate import cached_run, generate, new_decode_cache

    model, ids = sides_model()
    b, t0 = ids.shape
    lengths = torch.tensor(SIDES_LENGTHS)
    valid = torch.arange(t0) >= t0 - lengths[:, None]  # [B, T0]: pads first
    left = ids.masked_fill(~valid, 0)
    right = torch.zeros_like(ids)
    for row, n in enumerate(SIDES_LENGTHS):
        right[row, :n] = ids[row, t0 - n :]
    with torch.no_grad():
        choose = []
        for prompt, flags in ((left, valid), (right, valid.flip(1))):
            cache = new_decode_cache(model, batch=b, capacity=t0)
            logits = cached_run(model, prompt, cache, valid=flags, last=True)
            choose.append(tuple(logits.argmax(dim=-1).tolist()))
    alone = tuple(
        int(generate(model, ids[r : r + 1, t0 - n :], 1)[0, -1])
        for r, n in enumerate(SIDES_LENGTHS)
    )
    return SidesWalk(
        left_ids=tuple(map(tuple, left.tolist())),
        right_ids=tuple(map(tuple, right.tolist())),
        left_valid=tuple(map(tuple, valid.tolist())),
        left_next=choose[0],
        right_next=choose[1],
        alone_next=alone,
    )


SIDES_LABELS = {
    "en": {
        "left": "Padded on the left: the last column is real",
        "right": "Padded on the right: rows 1, 2 end in padding",
        "row": "row {b}",
        "pad": "pad",
        "alone": "alone: {tok}",
        "legend": (
            "prompt token",
            "its logits choose the next",
            "new token = alone's",
            "new token ≠ alone's",
        ),
    },
    "ru": {
        "left": "Паддинг слева: последний столбец настоящий",
        "right": "Паддинг справа: строки 1, 2 кончаются паддингом",
        "row": "строка {b}",
        "pad": "пад",
        "alone": "сама: {tok}",
        "legend": (
            "токен промпта",
            "его логиты выбирают след.",
            "новый = как у неё самой",
            "новый ≠ как у неё самой",
        ),
    },
}


def padding_sides_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two grids, left padding above right padding: each row's prompt, the last
    column's cell (whose logits choose) outlined, and the new token in the next
    column, green where it is the prompt's own next token alone, red where not."""
    t = text(SIDES_LABELS, language)
    walk = sides_walk()
    b, t0 = len(walk.left_ids), len(walk.left_ids[0])
    width, left, right = 5.2, -1.55, t0 + 3.0
    per_inch = (right - left) / width
    panel = 1.2 + b * 0.8  # a title, then b rows
    top, bottom = 0.05, -2 * panel - 0.95
    with style(theme) as p:
        ok, wrong = p.series[2], p.series[4]
        fig = plt.figure(figsize=(width, (top - bottom) / per_inch))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_axis_off()
        panels = (
            ("left", walk.left_ids, walk.left_valid, walk.left_next),
            ("right", walk.right_ids, None, walk.right_next),
        )
        for k, (side, ids, valid, chosen) in enumerate(panels):
            y0 = -k * panel
            ax.text(
                left + 0.1,
                y0 - 0.05,
                t[side],
                fontsize=11,
                fontweight="bold",
                color=p.ink,
                va="top",
            )
            for r in range(b):
                y = y0 - 1.2 - r * 0.8
                ax.text(
                    -0.15,
                    y + 0.33,
                    t["row"].format(b=r),
                    fontsize=10,
                    color=p.ink,
                    ha="right",
                    va="center",
                )
                n = SIDES_LENGTHS[r]
                for s, tok in enumerate(ids[r]):
                    real = valid[r][s] if valid is not None else s < n
                    last = s == t0 - 1
                    _cell(
                        ax,
                        s + 0.04,
                        y,
                        0.92,
                        0.66,
                        str(tok) if real else t["pad"],
                        face=p.series[0] if real else p.empty,
                        edge=p.ink if last else (p.border if not real else "none"),
                        ink=BOX_INK if real else p.muted,
                        gid=f"sides-{side}-{r}-{s}-{'real' if real else 'pad'}",
                    )
                    if last:
                        ax.patches[-1].set_linewidth(2.2)
                right_tok = chosen[r] == walk.alone_next[r]
                _cell(
                    ax,
                    t0 + 0.04,
                    y,
                    0.92,
                    0.66,
                    str(chosen[r]),
                    face=ok if right_tok else wrong,
                    gid=f"sides-{side}-{r}-new-{chosen[r]}",
                )
                ax.text(
                    t0 + 1.15,
                    y + 0.33,
                    t["alone"].format(tok=walk.alone_next[r]),
                    fontsize=10,
                    color=p.ink,
                    va="center",
                )
        handles = [
            Patch(facecolor=p.series[0], label=t["legend"][0]),
            Patch(facecolor="none", edgecolor=p.ink, lw=2.2, label=t["legend"][1]),
            Patch(facecolor=ok, label=t["legend"][2]),
            Patch(facecolor=wrong, label=t["legend"][3]),
        ]
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=2,
            fontsize=10,
            bbox_to_anchor=(left + 0.05, -2 * panel + 0.3),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.4,
            columnspacing=1.0,
            labelcolor=p.ink,
            frameon=False,
        )
    return fig


# ---------------------------------------------------------------------------------------
# "cache-beam-reorder" (chapter 8, "Beam search"): the cache rows each step's survivors
# take over.

BEAMS = 3
BEAM_STEPS = 5
BEAM_PROMPT = 4  # row 0 of `sides_model`'s prompts, its first 4 tokens


@dataclass(frozen=True)
class BeamWalk:
    """`beam_search` over one prompt: `tokens[t][i]` is beam row i's token at length
    t + 1; `rows[t]` the `reorder` before step t + 2 (row i takes row rows[t][i]);
    `best` the returned hypothesis, `best_rows` the cache row it ran in at each length
    but its last, and `prompt` the prompt."""

    prompt: tuple[int, ...]
    tokens: tuple[tuple[int, ...], ...]
    rows: tuple[tuple[int, ...], ...]
    best: tuple[int, ...]
    best_rows: tuple[int, ...]


def beam_walk() -> BeamWalk:
    """`beam_search` as `beam_generate` runs it (the prompt repeated per beam, one
    `DecodeCache` row per beam), with `step` and `reorder` recording what they get."""
    from literate.decoding.beam import beam_search
    from literate.decoding.generate import cached_run, new_decode_cache

    model, ids = sides_model()
    prompt = ids[:1, :BEAM_PROMPT]
    cache = new_decode_cache(model, batch=BEAMS, capacity=BEAM_PROMPT + BEAM_STEPS)
    fed, moved = [], []

    def step(tokens: torch.Tensor) -> torch.Tensor:
        fed.append(tuple(tokens.tolist()))
        return cached_run(model, tokens[:, None], cache, last=True)

    def reorder(rows: torch.Tensor) -> None:
        moved.append(tuple(rows.tolist()))
        cache.reorder(rows)

    with torch.no_grad():
        logits = cached_run(model, prompt.repeat_interleave(BEAMS, 0), cache, last=True)
        best = beam_search(
            logits, step, reorder, beams=BEAMS, max_new_tokens=BEAM_STEPS
        )
    # the histories: row i at length t + 1 extends row moved[t][i] at length t
    history = [(tok,) for tok in fed[0]]
    for rows, tokens in zip(moved[1:], fed[1:], strict=True):
        history = [history[r] + (tok,) for r, tok in zip(rows, tokens, strict=True)]
    winner = tuple(best.tokens[0].tolist())
    last_row = history.index(winner[:-1])
    best_rows = [last_row]
    for rows in reversed(moved[1:]):
        best_rows.insert(0, rows[best_rows[0]])
    return BeamWalk(
        prompt=tuple(prompt[0].tolist()),
        tokens=tuple(fed),
        rows=tuple(moved[1:]),
        best=winner,
        best_rows=tuple(best_rows),
    )


BEAM_LABELS = {
    "en": {
        "title": "Beam search, {k} beams: a cache row per beam",
        "prompt": "prompt {ids}, in all {k} rows",
        "row": "row {i}",
        "length": "token {t}",
        "reorder": "reorder({rows})",
        "best": "best: {ids}",
        "legend": ("row copied from another", "the best hypothesis"),
    },
    "ru": {
        "title": "Лучевой поиск, {k} луча: строка кеша на луч",
        "prompt": "промпт {ids}, во всех {k} строках",
        "row": "строка {i}",
        "length": "токен {t}",
        "reorder": "reorder({rows})",
        "best": "лучшая: {ids}",
        "legend": ("строка скопирована из другой", "лучшая гипотеза"),
    },
}


def beam_reorder_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """`beam_walk` as columns of tokens, one per length, one cell per cache row; an
    arrow from the row each survivor continues, the `reorder` rows under each column,
    the best hypothesis's cells outlined."""
    t = text(BEAM_LABELS, language)
    walk = beam_walk()
    k, steps = len(walk.tokens[0]), len(walk.tokens)
    gap = 1.55  # from one column to the next; a cell is 0.9 wide
    width, left, right = 5.2, -1.45, steps * gap + 1.0
    per_inch = (right - left) / width
    top, bottom = 1.95, -k * 0.8 - 1.2
    with style(theme) as p:
        copied, path = p.series[1], p.ink
        fig = plt.figure(figsize=(width, (top - bottom) / per_inch))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_axis_off()
        ax.text(
            left + 0.1,
            top - 0.05,
            t["title"].format(k=k),
            fontsize=12,
            fontweight="bold",
            color=p.ink,
            va="top",
        )
        ids = " ".join(str(i) for i in walk.prompt)
        ax.text(
            left + 0.1,
            top - 0.6,
            t["prompt"].format(ids=ids, k=k),
            fontsize=10,
            color=p.muted,
            va="top",
        )
        for i in range(k):
            ax.text(
                -0.15,
                -i * 0.8 + 0.3,
                t["row"].format(i=i),
                fontsize=10,
                color=p.ink,
                ha="right",
                va="center",
            )
        for c in range(steps):
            x = c * gap
            ax.text(
                x + 0.45,
                0.85,
                t["length"].format(t=c + 1),
                fontsize=10,
                color=p.muted,
                ha="center",
                va="center",
            )
            rows = walk.rows[c - 1] if c else tuple(range(k))
            for i in range(k):
                y = -i * 0.8
                moved = rows[i] != i
                on_path = c < len(walk.best_rows) and walk.best_rows[c] == i
                _cell(
                    ax,
                    x,
                    y,
                    0.9,
                    0.6,
                    str(walk.tokens[c][i]),
                    face=copied if moved else p.series[0],
                    edge=path if on_path else "none",
                    gid=f"beam-{c}-{i}-{walk.tokens[c][i]}-from-{rows[i]}",
                )
                if on_path:
                    ax.patches[-1].set_linewidth(2.2)
                if c:
                    ax.add_patch(
                        FancyArrowPatch(
                            (x - gap + 0.92, -rows[i] * 0.8 + 0.3),
                            (x - 0.02, y + 0.3),
                            arrowstyle="-|>",
                            mutation_scale=9,
                            color=p.muted,
                            lw=1.0,
                            shrinkA=0,
                            shrinkB=0,
                            gid=f"beam-arrow-{c}-{rows[i]}-{i}",
                        )
                    )
            if c:
                ax.text(
                    x + 0.45,
                    -(k - 1) * 0.8 - 0.3,
                    "[" + ", ".join(map(str, rows)) + "]",
                    fontsize=10,
                    color=p.ink,
                    ha="center",
                    va="center",
                )
        # the best hypothesis's last token: its own cell, after the row it ends in
        x, y = steps * gap, -walk.best_rows[-1] * 0.8
        _cell(
            ax,
            x,
            y,
            0.9,
            0.6,
            str(walk.best[-1]),
            face="none",
            edge=path,
            ink=p.ink,
            gid=f"beam-last-{walk.best[-1]}",
        )
        ax.add_patch(
            FancyArrowPatch(
                (x - gap + 0.92, y + 0.3),
                (x - 0.02, y + 0.3),
                arrowstyle="-|>",
                mutation_scale=9,
                color=p.ink,
                lw=1.0,
                shrinkA=0,
                shrinkB=0,
            )
        )
        ax.text(
            x + 0.45,
            0.85,
            t["length"].format(t=steps + 1),
            fontsize=10,
            color=p.muted,
            ha="center",
            va="center",
        )
        ax.text(
            -0.15,
            -(k - 1) * 0.8 - 0.3,
            "reorder",
            fontsize=10,
            color=p.ink,
            ha="right",
            va="center",
            family="monospace",
        )
        ybest = -(k - 1) * 0.8 - 0.85
        best = " ".join(str(i) for i in walk.best)
        handles = [
            Patch(facecolor=copied, label=t["legend"][0]),
            Patch(
                facecolor="none",
                edgecolor=path,
                lw=2.2,
                label=f"{t['legend'][1]}: {best}",
            ),
        ]
        ax.legend(
            handles=handles,
            loc="upper left",
            ncols=1,
            fontsize=10,
            bbox_to_anchor=(left + 0.05, ybest),
            bbox_transform=ax.transData,
            borderaxespad=0,
            handlelength=1.4,
            labelcolor=p.ink,
            frameon=False,
        )
    return fig


SPECS: list[tuple] = [
    (
        "cache-buffers",
        buffers_figure,
        "One layer's preallocated KV cache for a batch of 2 rows and 8 slots, keys and "
        "values alike, each a buffer of shape (2, 1, 8, 4), after a prefill of 5 "
        "slots and 2 decoding steps, as a grid of slots. Row 0, a prompt of 5 tokens, holds them in "
        "slots 0 to 4 at positions 0 to 4 and the decoded tokens in slots 5 and 6 at "
        "positions 5 and 6. Row 1, a prompt of 3 tokens left-padded to 5, has padding in "
        "slots 0 and 1, written but masked out, its prompt in slots 2 to 4 at positions "
        "0 to 2 and its decoded tokens in slots 5 and 6 at positions 3 and 4. Slot 7 is "
        "not written yet; an arrow marks it as next_pos = 7. Row 0's last query reads "
        "slots 0 to 6, row 1's slots 2 to 6.",
    ),
    (
        "cache-model",
        model_cache_figure,
        (
            "A tiny Llama's decode cache: one KV cache per block, 2 blocks, each "
            "layer's keys and values a buffer of shape (1, 2, 8, 8). Above the slots 0 "
            "to 7, the tokens 1 2 3 4 23 49. Call 1, the prompt, wrote slots 0 to 3 of "
            "both blocks; call 2, token 23, slot 4; call 3, token 49, slot 5; slots 6 "
            "and 7 are empty. next_pos is 6, where the token 0 that call 3's logits "
            "chose will be written in every block."
        ),
    ),
    (
        "cache-padding-sides",
        padding_sides_figure,
        (
            "Three prompts of 6, 4 and 2 tokens in one batch of width 6, padded on the "
            "left above and on the right below, and the next token each row chooses "
            "from its last column's logits. Left padding: every last column is a real "
            "token, and the rows choose 4, 37 and 0, what each prompt chooses alone. "
            "Right padding: rows 1 and 2 end in padding and choose 35 and 55 instead of "
            "37 and 0; row 0, unpadded, chooses 4 either way."
        ),
    ),
    (
        "cache-beam-reorder",
        beam_reorder_figure,
        (
            "Beam search with 3 beams on the prompt 9 42 53 22, one cache row per beam, "
            "5 new tokens. Length 1: rows 0 to 2 hold 55, 28 and 24. Before each later "
            "step the cache rows are reordered, taking rows 0, 1, 2, then rows 2, 1, 0 "
            "(row 0 takes row 2's history, row 2 row 0's), then rows 0, 1, 0 (row 0's "
            "history in two rows). The best hypothesis, 24 42 28 51 26, starts with the third-ranked "
            "first token, not the greedy 55, and runs in row 2, then row 0."
        ),
    ),
]
