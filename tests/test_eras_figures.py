"""Chapter 11's figures draw the library's numbers and cells: the parameters-against-
cache scatter plots exactly `parameter_counts` and the ledger's bytes per token, and the
blocks sheet has one panel per row of `era_table`, drawn as the row's "block" cell
says, and refuses a topology it has no drawing for."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Circle

import literate.numbers.eras
from literate.figures import FIGURES
from literate.figures import era_blocks as figures
from literate.figures import eras as params_figures
from literate.numbers.cache_ledger import ledger_row
from literate.numbers.eras import era_table
from literate.numbers.params import cache_bytes
from literate.numbers.published import PUBLISHED_CONFIGS, cache_shape, parameter_counts

KIB = 1024


def markers(ax) -> dict[str, tuple[float, float]]:
    """'total Llama 3 8B' -> (x, y), read back from the scatter collections."""
    points = {}
    for collection in ax.collections:
        offsets = collection.get_offsets()
        assert len(offsets) == 1, collection.get_label()
        name = collection.get_label().removeprefix("_")
        points[name] = tuple(map(float, offsets[0]))
    return points


def test_the_params_figure_plots_exactly_the_library_numbers():
    fig = params_figures.params_cache_figure()
    ax = fig.axes[0]
    points = markers(ax)
    moe = {n for n in PUBLISHED_CONFIGS if len(set(parameter_counts(n))) == 2}
    assert moe == {"Mixtral 8x7B", "Qwen3-30B-A3B", "DeepSeek-V3", "gpt-oss-120b"}
    assert set(points) == (
        {f"total {n}" for n in PUBLISHED_CONFIGS} | {f"active {n}" for n in moe}
    )
    links = {
        line.get_label().removeprefix("_link "): line
        for line in ax.lines
        if line.get_label().startswith("_link")
    }
    assert set(links) == moe
    for name in PUBLISHED_CONFIGS:
        total, active = parameter_counts(name)
        shape = cache_shape(name)
        per_token = ledger_row(shape)["bytes/token"]
        # one token is within every window: each layer keeps that one position
        assert per_token == cache_bytes(shape, 1) == shape.width * 2 * shape.n_layers
        # exact: every count is below 2**53, so the float64 offsets hold it unrounded
        assert points[f"total {name}"] == (total, per_token), name
        if name in moe:
            assert points[f"active {name}"] == (active, per_token), name
            assert list(links[name].get_xdata()) == [active, total]
            assert list(links[name].get_ydata()) == [per_token, per_token]
    labels = [t.get_text() for t in ax.texts]
    assert labels == list(PUBLISHED_CONFIGS)  # one name per model, no other text
    plt.close(fig)


def test_the_cache_families_are_read_from_the_cache_shapes():
    families = {n: params_figures.cache_family(n) for n in PUBLISHED_CONFIGS}
    assert {n for n, f in families.items() if f == "latent"} == {"DeepSeek-V3"}
    assert {n for n, f in families.items() if f == "windowed"} == {
        "Mistral 7B v0.1",
        "Gemma 3 27B",
        "gpt-oss-120b",
    }
    fig = params_figures.params_cache_figure(theme="dark")
    colours = {
        c.get_label(): tuple(c.get_facecolor()[0])
        for c in fig.axes[0].collections
        if c.get_label().startswith("_total")
    }
    by_family = {}
    for name, family in families.items():
        by_family.setdefault(family, set()).add(colours[f"_total {name}"])
    assert all(len(c) == 1 for c in by_family.values())  # one colour per family
    assert len(set().union(*by_family.values())) == 3  # and three families
    plt.close(fig)


def test_the_params_alt_text_states_the_library_numbers():
    alt = FIGURES["eras-params-cache"].alt
    per_token = {
        n: ledger_row(cache_shape(n))["bytes/token"] for n in PUBLISHED_CONFIGS
    }
    totals = {n: parameter_counts(n)[0] for n in PUBLISHED_CONFIGS}
    assert round(totals["GPT-2 small"] / 1e6) == 124 and "124 million" in alt
    assert round(totals["DeepSeek-V3"] / 1e9) == 671 and "671 billion" in alt
    assert min(totals, key=totals.get) == "GPT-2 small"
    assert max(totals, key=totals.get) == "DeepSeek-V3"
    assert per_token["GPT-2 small"] == 36 * KIB and "36 KiB" in alt
    assert per_token["Command R v01"] == 1280 * KIB and "1,280 KiB" in alt
    assert min(per_token, key=per_token.get) == "GPT-2 small"
    assert max(per_token, key=per_token.get) == "Command R v01"
    assert per_token["Command R v01"] == 40 * 2 * 8192 * 2  # K and V, bfloat16
    assert (
        per_token["Mixtral 8x7B"]
        == per_token["Llama 3 8B"]
        == per_token["Mistral 7B v0.1"]
    )
    assert (
        totals["Mixtral 8x7B"]
        > 5 * totals["Llama 3 8B"]
        > 5 * totals["Mistral 7B v0.1"]
    )
    assert all(
        per_token[n] < per_token["Llama 3 8B"]
        for n in ("Qwen3-30B-A3B", "gpt-oss-120b", "DeepSeek-V3")
    )
    assert 0.95 < per_token["Gemma 3 27B"] / per_token["Llama 2 7B"] < 1


# --------------------------------------------------------------------------------------
# The blocks of the eras

# What each topology draws: the (+) joins and the norm boxes of one block
DRAWN = {
    "pre-norm, serial": (2, 2),
    "post-norm, serial": (2, 2),
    "sandwich, serial": (2, 4),
    "output norm, serial": (2, 2),
    "parallel (one norm)": (1, 1),
    "parallel (two norms)": (1, 2),
}


def boxes(ax, role: str) -> list[str]:
    """The labels of the panel's boxes of one role ("norm", "attn", "cross", "ffn")."""
    assert sum(p.get_label() == f"_{role}" for p in ax.patches) == sum(
        t.get_label() == f"_{role}" for t in ax.texts
    )
    return [t.get_text() for t in ax.texts if t.get_label() == f"_{role}"]


def test_the_blocks_figure_has_one_panel_per_era_row_drawn_as_its_block_cell(
    monkeypatch,
):
    built = []

    def recorded():  # the figure builds the table itself: keep what it drew
        built.append(table(literate.numbers.eras.ERA_ROWS))
        return built[-1]

    table = literate.numbers.eras.era_table
    monkeypatch.setattr(literate.numbers.eras, "era_table", recorded)
    fig = figures.era_blocks_figure()
    (rows,) = built
    assert len(fig.axes) == len(rows) >= 12
    for ax, row in zip(fig.axes, rows):
        texts = [t.get_text() for t in ax.texts]
        name = row["era"].removesuffix(" (a block)")
        assert f"{name} ({row['year']})" in texts
        assert (row["era"] != name) == any("the block alone" in t for t in texts)
        joins = sum(isinstance(p, Circle) for p in ax.patches)
        cross = "cross-attention" in row["attention"]
        want_joins, want_norms = DRAWN[row["block"]]
        assert joins == want_joins + cross, row["era"]
        norms = boxes(ax, "norm")
        assert len(norms) == want_norms + cross, row["era"]
        assert set(norms) == {figures.NORM_NAMES[row["norm"]]}, row["era"]
        assert len(boxes(ax, "cross")) == cross
        assert len(boxes(ax, "attn")) == len(boxes(ax, "ffn")) == 1
    names = [row["era"] for row in rows]
    assert names[0] == "Transformer base" and "gpt-oss-120b" in names
    attention = dict(zip(names, (boxes(ax, "attn")[0] for ax in fig.axes)))
    assert attention["Llama 3 8B"] == "GQA\n32 q · 8 kv heads"
    assert attention["GPT-2 small"] == "MHA\n12 heads"
    plt.close(fig)


ROW = {
    "era": "Test era",
    "block": "pre-norm, serial",
    "norm": "RMSNorm",
    "positions": "RoPE (rotate-half), base 500,000",
    "attention": "GQA, 32 heads, 8 key/value",
    "windows": "none",
    "sinks": "none",
    "FFN": "SwiGLU",
}


def test_an_unknown_block_topology_is_refused_and_unknown_columns_are_ignored():
    open_figures = plt.get_fignums()
    with pytest.raises(
        ValueError,
        match=re.escape(
            "block must be one of ['output norm, serial', 'parallel (one norm)', "
            "'parallel (two norms)', 'post-norm, serial', 'pre-norm, serial', "
            "'sandwich, serial'], got 'hybrid, serial'"
        ),
    ):
        figures.era_blocks_figure(rows=[ROW, ROW | {"block": "hybrid, serial"}])
    assert plt.get_fignums() == open_figures  # refused before any drawing
    with pytest.raises(ValueError, match=r"^an era_table row needs a 'FFN' cell"):
        figures.panel({k: v for k, v in ROW.items() if k != "FFN"})
    fig = figures.era_blocks_figure(rows=[ROW | {"a new column": "anything"}])
    assert len(fig.axes) == 1
    plt.close(fig)


def test_the_panels_read_the_cells():
    decoder = ROW | {
        "block": "post-norm, serial",
        "FFN": "relu",
        "attention": "MHA, 8 heads; cross-attention, MHA, 8 heads",
        "positions": "sinusoidal, added to the embeddings",
    }
    pan = figures.panel(decoder)
    assert (pan.topology, pan.attention, pan.cross, pan.ffn, pan.caption) == (
        "post",
        ("MHA", "8 heads"),
        ("cross-attention", "8 heads"),
        ("ReLU",),
        ("sinusoidal positions",),
    )
    latent = ROW | {
        "attention": "latent, 128 heads (rank 512, RoPE part 64)",
        "FFN": "SwiGLU in 3 layers, then MoE, top-8 of 256 experts + a "
        "shared expert in 58 layers",
        "positions": "RoPE (interleaved), base 10,000 (YaRN x40)",
    }
    pan = figures.panel(latent)
    assert pan.attention == ("MLA", "128 heads, rank 512")
    assert pan.ffn == ("MoE: top-8 of 256", "+ a shared expert", "layers 1–3: SwiGLU")
    assert pan.caption == ("RoPE θ=10K (YaRN\u00a0×40)",)
    local_global = ROW | {
        "positions": "RoPE (rotate-half), base 10,000 / 1,000,000 (positions / 8)"
    }
    moe = ROW | {"FFN": "MoE, top-4 of 128 clamped SwiGLU experts"}
    assert figures.panel(moe).ffn == ("MoE: top-4 of 128", "clamped SwiGLU experts")
    assert figures.panel(moe, "ru").ffn == (
        "MoE: top-4 из 128",
        "эксперты: clamped SwiGLU",
    )
    for row in era_table():  # every MoE cell of the table is read, none shown raw
        if "MoE" in row["FFN"]:
            assert figures.panel(row).ffn[0].startswith("MoE: top-"), row["FFN"]
    assert figures.panel(local_global).caption == (
        "RoPE θ=10K / 1M (positions\u00a0/\u00a08)",
    )  # not broken inside (...)
    ru = figures.panel(local_global, "ru").caption
    assert ru == ("RoPE θ=10\u00a0тыс. / 1\u00a0млн", "(позиции\u00a0/\u00a08)")
    sinks = ROW | {
        "positions": "RoPE (rotate-half), base 150,000, YaRN x32",
        "QK-norm": "per head",
        "windows": "128 in 18 of 36 layers",
        "sinks": "per head",
    }
    pan = figures.panel(sinks, "ru")
    assert pan.attention == ("GQA", "голов: 32 q · 8 kv", "QK-norm")
    assert " · ".join(pan.caption).replace("\u00a0", " ") == (
        "RoPE θ=150 тыс., YaRN ×32 · окно 128 в 18/36 слоях · стоки"
    )
    assert len(pan.caption) == 2 and all(  # wrapped to the panel
        figures.text_width(line, figures.LINE_FONT) <= figures.PANEL_W
        for line in pan.caption
    )
    pan = figures.panel(
        ROW
        | {
            "attention": "a new attention",
            "FFN": "a new FFN",
            "positions": ", ".join(["new positions"] * 5),
        }
    )
    assert (pan.attention, pan.ffn) == (("a new attention",), ("a new FFN",))  # as is
    assert " ".join(pan.caption) == ", ".join(["new positions"] * 5)
    assert len(pan.caption) > 1 and all(
        figures.text_width(line, figures.LINE_FONT) <= figures.PANEL_W
        for line in pan.caption
    )
