"""Diagrams (issue 26): drawn from the code, light and dark, English and Russian.

`SPECS` lists this module's figures as (name, draw function, alt text); `literate.figures`
registers them with the others.

Chapter 5: the causality probe with and without the mask (which rows each position
reads, and what it adds), the whole GPT-2 as a stack with the page's tiny model's shapes
and counts (one embedding matrix used twice), and `generate` cropping the context. Every
number is computed here by running the chapter's own modules.
"""

# Over 450 lines on purpose: chapter 5's three diagrams, each with its English
# and Russian labels and the run of the page's model it reads its numbers from.

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from literate.figures.style import BOX_INK, style, text
from literate.minimal.attention import causal_mask
from literate.minimal.gpt2 import GPT2Model
from literate.minimal.multi_head import MultiHeadAttention
from literate.models.gpt2 import gpt2_model

F64 = torch.float64
PROBE_TOKENS = ((3.0, 0.0, 0.0, 0.0), (0.0, 3.0, 0.0, 0.0), (0.0, 0.0, 3.0, 0.0))
# The page's tiny GPT-2 (seed 1) and the ids it runs.
TINY = dict(vocab_size=11, n_positions=12, d_model=16, n_heads=4, n_layers=2)
TINY_SEED, TINY_IDS = 1, ((1, 2, 3),)
# generate with a short context, so the crop fits on a phone.
CROP = dict(vocab_size=11, context=6, d_model=16, n_heads=4, n_layers=2)
CROP_SEED, CROP_PROMPT, CROP_STEPS = 1, (3, 1, 4, 1, 5, 9, 2, 6), 3
CROP_STD = 0.3  # matrices of order one, as the page's HF check: no repeated token


def fmt(value: float, language: str, digits: int = 2) -> str:
    s = f"{value:.{digits}f}"
    return s.replace(".", ",") if language == "ru" else s


def short(value: float, language: str) -> str:
    """1.5 as '1.5', 6.0 as '6': the probe's outputs, as the page writes them."""
    s = f"{value:.2f}".rstrip("0").rstrip(".")
    return s.replace(".", ",") if language == "ru" else s


def canvas(width: float, height: float):
    """A figure and one axes whose data coordinates are inches from the bottom left."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def cell(ax, x, y, w, h, label, *, face, ink, gid=None, size=11, edge=None, bold=False):
    ax.add_patch(
        FancyBboxPatch(
            (x + 0.03, y + 0.03),
            w - 0.06,
            h - 0.06,
            boxstyle="round,pad=0,rounding_size=0.05",
            facecolor=face,
            edgecolor=edge or face,
            linewidth=1.0,
        )
    )
    t = ax.text(
        x + w / 2,
        y + h / 2,
        label,
        ha="center",
        va="center",
        fontsize=size,
        fontweight="bold" if bold else "normal",
    )
    t.set_color(ink)
    if gid:
        t.set_gid(gid)
    return t


# --- gpt2-causality-probe ----------------------------------------------------------


def causality_probe(x: torch.Tensor, *, causal: bool) -> torch.Tensor:
    """The page's probe: x + the average of the rows each position may read (q, k
    zero, v and o the identity), run by chapter 3's MultiHeadAttention."""
    d, t = x.shape[-1], x.shape[1]
    attn = MultiHeadAttention(d_model=d, n_heads=2).double()
    with torch.no_grad():
        for p in attn.parameters():
            p.zero_()
        attn.v_proj.weight.copy_(torch.eye(d))
        attn.o_proj.weight.copy_(torch.eye(d))
        return x + attn(x, allowed=causal_mask(t, t) if causal else None)


def probe() -> dict[str, dict[str, list[list[float]]]]:
    """For each setting, the weights each query gives each key (read off the output:
    token j is 3 e_j, so what position i adds is 3 w_ij in coordinate j) and the
    outputs."""
    x = torch.tensor([PROBE_TOKENS], dtype=F64)  # [1, 3, 4]
    n = x.shape[1]
    out = {}
    for name, causal in (("causal", True), ("open", False)):
        y = causality_probe(x, causal=causal)[0]  # [3, 4]
        weights = (y - x[0])[:, :n] / 3  # [3, 3]
        out[name] = {"weights": weights.tolist(), "outputs": y.tolist()}
    return out


PROBE_LABELS = {
    "en": {
        "title": "The causality probe: three tokens 3·e₀, 3·e₁, 3·e₂",
        "causal": "With the causal mask: position t reads 0..t",
        "open": "Without a mask: every position reads all three",
        "query": "pos. {i}",
        "key": "key {j}",
        "out": "output",
    },
    "ru": {
        "title": "Проба причинности: три токена 3·e₀, 3·e₁, 3·e₂",
        "causal": "С причинной маской: позиция t читает 0..t",
        "open": "Без маски: каждая позиция читает все три",
        "query": "поз. {i}",
        "key": "ключ {j}",
        "out": "выход",
    },
}


def probe_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Two grids (with and without the mask): the weight each position gives each
    token, blocked cells empty, and the output row each position ends with."""
    t = text(PROBE_LABELS, language)
    runs = probe()
    w, h, cw, ch, left = 5.2, 4.2, 0.64, 0.38, 0.95
    with style(theme) as p:
        fig, ax = canvas(w, h)
        ax.text(
            0.05,
            h - 0.22,
            t["title"],
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y = h - 0.62
        for name, colour in (("causal", p.series[0]), ("open", p.series[1])):
            ax.text(0.05, y, t[name], fontsize=11, va="center", color=p.ink)
            y -= 0.34
            for j in range(3):
                ax.text(
                    left + (j + 0.5) * cw,
                    y,
                    t["key"].format(j=j),
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=p.muted,
                )
            ax.text(
                left + 3 * cw + 0.2,
                y,
                t["out"],
                va="center",
                fontsize=10,
                color=p.muted,
            )
            y -= 0.1
            for i, (row, output) in enumerate(
                zip(runs[name]["weights"], runs[name]["outputs"])
            ):
                y -= ch
                ax.text(
                    0.05,
                    y + ch / 2,
                    t["query"].format(i=i),
                    va="center",
                    fontsize=10,
                    color=p.ink,
                )
                for j, weight in enumerate(row):
                    if weight == 0:
                        cell(
                            ax,
                            left + j * cw,
                            y,
                            cw,
                            ch,
                            "",
                            face="none",
                            ink=p.muted,
                            edge=p.border,
                            gid=f"{name}-w-{i}-{j}",
                        )
                    else:
                        cell(
                            ax,
                            left + j * cw,
                            y,
                            cw,
                            ch,
                            fmt(weight, language),
                            face=colour,
                            ink=BOX_INK,
                            size=10,
                            gid=f"{name}-w-{i}-{j}",
                        )
                comma = "; " if language == "ru" else ", "  # ru: 1,5 is a number
                vector = "(" + comma.join(short(v, language) for v in output) + ")"
                ax.text(
                    left + 3 * cw + 0.2,
                    y + ch / 2,
                    vector,
                    va="center",
                    fontsize=10,
                    color=p.ink,
                ).set_gid(f"{name}-out-{i}")
            y -= 0.42
    return fig


# --- gpt2-model-stack --------------------------------------------------------------


def model_stack() -> dict[str, object]:
    """The page's tiny GPT-2 run on its ids: each part's output shape (forward hooks)
    and parameter count, and whether the head's weight is the embedding's tensor."""
    with torch.random.fork_rng():
        torch.manual_seed(TINY_SEED)
        model = GPT2Model(**TINY, dropout=0.0).double().eval()
    parts = [("token_embedding", model.token_embedding), ("positions", model.positions)]
    parts += [(f"block_{i}", block) for i, block in enumerate(model.blocks)]
    parts += [("final_norm", model.final_norm), ("lm_head", model.lm_head)]
    shapes = {}
    hooks = [
        module.register_forward_hook(
            lambda mod, args, out, key=key: shapes.__setitem__(key, list(out.shape))
        )
        for key, module in parts
    ]
    with torch.no_grad():
        model(torch.tensor(TINY_IDS))
    for hook in hooks:
        hook.remove()
    embedding = model.token_embedding.weight
    counts = {
        key: sum(p.numel() for p in module.parameters() if p is not embedding)
        for key, module in parts
    }
    counts["token_embedding"] = embedding.numel()
    return {
        "ids": list(torch.tensor(TINY_IDS).shape),
        "shapes": shapes,
        "counts": counts,
        "total": sum(p.numel() for p in model.parameters()),
        "embedding": list(embedding.shape),
        "positions_table": list(next(model.positions.parameters()).shape),
        "tied": model.lm_head.weight is embedding,
    }


STACK_LABELS = {
    "en": {
        "title": "The page's tiny GPT-2 on ids [[1, 2, 3]]",
        "head": ("part", "output", "parameters"),
        "ids": "ids",
        "token_embedding": "token embedding E {s}",
        "positions": "+ positions P {s}",
        "block": "block {i}: LN, attention, LN, FFN",
        "final_norm": "final LayerNorm",
        "lm_head": "head: logits = h Eᵀ",
        "tied": "the same E",
        "shared": "0 (tied)",
        "total": "total",
    },
    "ru": {
        "title": "Маленький GPT-2 страницы на ids [[1, 2, 3]]",
        "head": ("часть", "выход", "параметры"),
        "ids": "ids",
        "token_embedding": "эмбеддинг токенов E {s}",
        "positions": "+ позиции P {s}",
        "block": "блок {i}: LN, внимание, LN, FFN",
        "final_norm": "финальный LayerNorm",
        "lm_head": "голова: логиты = h Eᵀ",
        "tied": "та же E",
        "shared": "0 (связана)",
        "total": "всего",
    },
}


def shape_text(shape: list[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def count_text(n: int, language: str) -> str:
    return f"{n:,}".replace(",", "\u202f" if language == "ru" else ",")


def stack_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """Boxes top to bottom, ids to logits, each with its output shape and parameter
    count; an arrow from the embedding to the head: one matrix, used twice."""
    t = text(STACK_LABELS, language)
    run = model_stack()
    shapes, counts = run["shapes"], run["counts"]
    blocks = [key for key in shapes if key.startswith("block_")]
    rows = [
        (
            "token_embedding",
            t["token_embedding"].format(s=shape_text(run["embedding"])),
            0,
        ),
        ("positions", t["positions"].format(s=shape_text(run["positions_table"])), 0),
        *[(key, t["block"].format(i=int(key.split("_")[1]) + 1), 2) for key in blocks],
        ("final_norm", t["final_norm"], 3),
        ("lm_head", t["lm_head"], 1),
    ]
    w, rh, bx, bw = 5.2, 0.42, 0.8, 2.55
    h = 0.4 + 0.4 + rh * (len(rows) + 2) + 0.15
    with style(theme) as p:
        fig, ax = canvas(w, h)
        ax.text(
            0.05,
            h - 0.22,
            t["title"],
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y = h - 0.62
        for x0, head in zip((bx, 3.45, 4.35), t["head"]):
            ax.text(
                x0 + (bw / 2 if x0 == bx else 0.35),
                y,
                head,
                ha="center",
                va="center",
                fontsize=10,
                color=p.muted,
            )
        y -= rh
        ax.text(
            bx + bw / 2,
            y + rh / 2,
            t["ids"],
            ha="center",
            va="center",
            fontsize=11,
            color=p.ink,
        )
        ax.text(
            3.8,
            y + rh / 2,
            shape_text(run["ids"]),
            ha="center",
            va="center",
            fontsize=10,
            color=p.ink,
        ).set_gid("shape-ids")
        tops = {}
        for key, label, colour in rows:
            y -= rh
            tops[key] = y + rh / 2
            cell(ax, bx, y, bw, rh, label, face=p.series[colour], ink=BOX_INK, size=10)
            ax.text(
                3.8,
                y + rh / 2,
                shape_text(shapes[key]),
                ha="center",
                va="center",
                fontsize=10,
                color=p.ink,
            ).set_gid(f"shape-{key}")
            count = (
                t["shared"]
                if key == "lm_head" and run["tied"]
                else count_text(counts[key], language)
            )
            ax.text(
                5.15,
                y + rh / 2,
                count,
                ha="right",
                va="center",
                fontsize=10,
                color=p.ink,
            ).set_gid(f"count-{key}")
        y -= rh
        ax.text(
            bx + bw / 2,
            y + rh / 2,
            t["total"],
            ha="center",
            va="center",
            fontsize=11,
            fontweight="bold",
            color=p.ink,
        )
        ax.text(
            5.15,
            y + rh / 2,
            count_text(run["total"], language),
            ha="right",
            va="center",
            fontsize=11,
            fontweight="bold",
            color=p.ink,
        ).set_gid("count-total")
        if run["tied"]:
            ax.add_patch(
                FancyArrowPatch(
                    (bx + 0.02, tops["token_embedding"]),
                    (bx + 0.02, tops["lm_head"]),
                    connectionstyle="arc3,rad=0.3",
                    arrowstyle="-|>",
                    mutation_scale=12,
                    color=p.series[0],
                    lw=1.8,
                )
            )
            middle = (tops["token_embedding"] + tops["lm_head"]) / 2
            ax.text(
                bx - 0.2,
                middle,
                t["tied"],
                rotation=90,
                ha="center",
                va="center",
                fontsize=10,
                color=p.series[0],
            ).set_gid("tied")
    return fig


# --- gpt2-generate-crop ------------------------------------------------------------


def crop_run() -> dict[str, object]:
    """`generate` on a GPT-2 with CROP['context'] positions from an 8-token prompt: the
    ids after each step, and the window (the last `context` ids) each step read."""
    with torch.random.fork_rng():
        torch.manual_seed(CROP_SEED)
        model = gpt2_model(**CROP, dropout=0.0).double().eval()
        with torch.no_grad():  # GPT-2's init would copy the last token: a tied head
            for weight in model.parameters():
                if weight.ndim == 2:
                    weight.normal_(0.0, CROP_STD)
    prompt = torch.tensor([CROP_PROMPT])
    generated = model.generate(prompt, CROP_STEPS)[0].tolist()
    steps = []
    for s in range(CROP_STEPS):
        ids = generated[: len(CROP_PROMPT) + s]
        window = ids[-model.context :]
        with torch.no_grad():
            chosen = int(model(torch.tensor([window]))[0, -1].argmax())
        steps.append({"ids": ids, "window": window, "chosen": chosen})
    return {"context": model.context, "generated": generated, "steps": steps}


CROP_LABELS = {
    "en": {
        "title": "generate with C = {c} positions, an {n}-token prompt",
        "step": "step {s}",
        "position": "positions 0..{last}, renumbered",
        "out": "out of view",
        "new": "new",
    },
    "ru": {
        "title": "generate с C = {c} позициями, промпт из {n} токенов",
        "step": "шаг {s}",
        "position": "позиции 0..{last}, заново",
        "out": "вне окна",
        "new": "новый",
    },
}


def crop_figure(*, language: str = "en", theme: str = "light") -> Figure:
    """One row per step: the ids so far, the last C of them (the window the model
    reads, positions 0..C-1) coloured, those before it greyed, the token chosen from
    the window's last logits appended."""
    t = text(CROP_LABELS, language)
    run = crop_run()
    c = run["context"]
    w, bw, x0 = 5.2, 0.4, 0.8
    h = 0.55 + CROP_STEPS * 0.95 + 0.1
    with style(theme) as p:
        fig, ax = canvas(w, h)
        title = t["title"].format(c=c, n=len(CROP_PROMPT))
        ax.text(
            0.05,
            h - 0.22,
            title,
            fontsize=12,
            fontweight="bold",
            va="center",
            color=p.ink,
        )
        y = h - 0.55
        for s, step in enumerate(run["steps"]):
            y -= 0.45
            ax.text(
                0.05,
                y + 0.2,
                t["step"].format(s=s + 1),
                va="center",
                fontsize=10,
                color=p.ink,
            )
            n = len(step["ids"])
            for i, token in enumerate(step["ids"]):
                in_window = i >= n - c
                face = p.series[0] if in_window else p.empty
                ink = BOX_INK if in_window else p.muted
                cell(
                    ax,
                    x0 + i * bw,
                    y,
                    bw,
                    0.4,
                    str(token),
                    face=face,
                    ink=ink,
                    size=10,
                    gid=f"step{s}-id-{i}",
                )
                if in_window:
                    ax.text(
                        x0 + (i + 0.5) * bw,
                        y - 0.13,
                        str(i - (n - c)),
                        ha="center",
                        va="center",
                        fontsize=10,
                        color=p.muted,
                    ).set_gid(f"step{s}-pos-{i}")
            cell(
                ax,
                x0 + n * bw,
                y,
                bw,
                0.4,
                str(step["chosen"]),
                face=p.series[1],
                ink=BOX_INK,
                size=10,
                bold=True,
                gid=f"step{s}-new",
            )
            if s == 0:
                ax.text(
                    x0 + (n - c) * bw / 2,
                    y - 0.13,
                    t["out"],
                    ha="center",
                    va="center",
                    fontsize=10,
                    color=p.muted,
                )
            if s == 0:
                ax.text(
                    x0 + (n + 1) * bw + 0.05,
                    y + 0.2,
                    "← " + t["new"],
                    va="center",
                    fontsize=10,
                    color=p.series[1],
                )
            y -= 0.5
        ax.text(
            0.05,
            0.12,
            t["position"].format(last=c - 1),
            fontsize=10,
            color=p.muted,
            va="center",
        )
    return fig


SPECS: list[tuple] = [
    (
        "gpt2-causality-probe",
        probe_figure,
        "The causality probe on three tokens 3 e0, 3 e1, 3 e2, as weight grids. With "
        "the causal mask, position 0 gives weight 1 to itself, position 1 gives 0.50 to "
        "keys 0 and 1, position 2 gives 0.33 to each of the three; the outputs are "
        "(6, 0, 0, 0), (1.5, 4.5, 0, 0) and (1, 1, 4, 0). Without a mask every position "
        "gives 0.33 to all three keys and adds (1, 1, 1, 0): position 0 has read the "
        "two tokens after it.",
    ),
    (
        "gpt2-model-stack",
        stack_figure,
        "The page's tiny GPT-2 (11 tokens, 12 positions, width 16, 2 blocks) on ids of "
        "shape 1 by 3, part by part with its output shape and parameter count: token "
        "embedding E 11 by 16, 176 parameters, output 1 by 3 by 16; positions P 12 by 16, "
        "192; two blocks of 3,280 each, output 1 by 3 by 16; final LayerNorm, 32; the head "
        "computes h times E transposed with the same matrix E, no parameters of its own, "
        "output 1 by 3 by 11. Total 6,960.",
    ),
    (
        "gpt2-generate-crop",
        crop_figure,
        "generate on a GPT-2 with 6 positions, from an 8-token prompt, three steps. At "
        "every step the model reads only the last 6 ids, renumbered as positions 0 to 5; "
        "the ids before them are out of view; the token chosen from the last position's "
        "logits is appended, and the window moves one to the right.",
    ),
]
