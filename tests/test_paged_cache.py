"""Tests for `literate.parts.paged_cache`: the paged KV cache of chapter 8.

Against an independent reference written from the paper (Kwon et al. 2023): token t's
key at block `table[t // b]`, slot `t % b` (sec. 4.2), and PagedAttention computed
block by block through the table (sec. 4.1, eq. 4); against the preallocated
`KVCache` (the same layer, the same model, the same beam search, bit for bit); and
against Hugging Face's own paged cache (continuous batching, `generate_batch`).
"""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from literate.decoding.beam import beam_generate, beam_search
from literate.decoding.generate import cached_run, generate, new_decode_cache
from literate.models.gpt2 import gpt2_init_, gpt2_model
from literate.models.llama import llama_from_hf_config, llama_model, load_hf_llama
from literate.parts.cache import DecodeCache, KVCache
from literate.parts.multi_head import MultiHeadAttention
from literate.parts.paged_cache import BlockPool, PagedKVCache, PagedSequence

F64 = torch.float64


def paged_decode_cache(model, batch, capacity, **pool):
    return DecodeCache(
        [
            PagedKVCache(
                batch,
                b.attn.n_kv_heads,
                capacity,
                b.attn.d_head,
                dtype=b.attn.k_proj.weight.dtype,
                **pool,
            )
            for b in model.blocks
        ]
    )


def refs_from_tables(pool: BlockPool, sequences) -> list[int]:
    """The reference count each block should have: the tables that hold it."""
    counts = [0] * len(pool.refs)
    for seq in sequences:
        for block in seq.table:
            counts[block] += 1
    return counts


# The minimal version, against the paper's addressing


def test_token_t_lives_at_table_t_div_b_slot_t_mod_b():
    g = torch.Generator().manual_seed(0)
    pool = BlockPool(12, 3, 2, 4, dtype=F64)
    seqs = [PagedSequence(pool) for _ in range(3)]
    keys = [[] for _ in seqs]
    for step in range(9):  # interleaved, so the blocks of a sequence are not adjacent
        for i, seq in enumerate(seqs[: 1 + step % 3]):
            k = torch.randn(2, 4, generator=g, dtype=F64)
            seq.append(k, -k)
            keys[i].append(k)
    for seq, ks in zip(seqs, keys):
        assert seq.length == len(ks)
        for t, k in enumerate(ks):
            block, slot = seq.table[t // 3], t % 3
            assert torch.equal(pool.k[block, slot], k)
            assert torch.equal(pool.v[block, slot], -k)
        k_all, v_all = seq.gather()
        assert torch.equal(k_all, torch.stack(ks, dim=1))  # [H_kv, T, d_head]
        assert torch.equal(v_all, -torch.stack(ks, dim=1))
        assert len(seq.table) == math.ceil(len(ks) / 3)  # a block only when full
    # interleaved writes: some sequence's blocks are not consecutive in the pool
    assert any(
        s.table != list(range(s.table[0], s.table[0] + len(s.table))) for s in seqs
    )


def paged_attention_reference(q, pool, table, length, scale):
    """PagedAttention as sec. 4.1 writes it: scores and values read block by block
    through the table, then one softmax over every block's scores (eq. 4).
    q [H, d] (H = H_kv here) -> [H, d]."""
    scores, values = [], []
    for j, block in enumerate(table):
        n = min(pool.block_size, length - j * pool.block_size)
        k_j = pool.k[block, :n]  # [n, H, d]: the j-th block's keys
        scores.append(torch.einsum("hd,nhd->hn", q, k_j) * scale)
        values.append(pool.v[block, :n])
    a = torch.softmax(torch.cat(scores, dim=1), dim=1)  # [H, T]
    return torch.einsum("ht,thd->hd", a, torch.cat(values, dim=0))


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_attention_on_gathered_keys_equals_blockwise_paged_attention(block_size):
    g = torch.Generator().manual_seed(block_size)
    pool = BlockPool(40, block_size, 2, 8, dtype=F64)
    a, b = PagedSequence(pool), None
    for t in range(11):
        a.append(
            torch.randn(2, 8, generator=g, dtype=F64),
            torch.randn(2, 8, generator=g, dtype=F64),
        )
        if t == 6:
            b = a.fork()
    for _ in range(5):
        b.append(
            torch.randn(2, 8, generator=g, dtype=F64),
            torch.randn(2, 8, generator=g, dtype=F64),
        )
    q = torch.randn(2, 8, generator=g, dtype=F64)
    for seq in (a, b):
        k, v = seq.gather()
        fused = F.scaled_dot_product_attention(q[:, None], k, v)[:, 0]
        reference = paged_attention_reference(q, pool, seq.table, seq.length, 8**-0.5)
        torch.testing.assert_close(fused, reference, rtol=0, atol=1e-12)


def test_fork_shares_every_block_and_copy_on_write_copies_only_the_last():
    pool = BlockPool(16, 4, 1, 1)
    parent = PagedSequence(pool)
    for t in range(10):
        parent.append(torch.tensor([[float(t)]]), torch.tensor([[float(t)]]))
    children = [parent.fork() for _ in range(3)]
    assert pool.refs[:3] == [4, 4, 4] and len(pool.free) == 13
    for i, seq in enumerate([parent, *children]):
        seq.append(torch.tensor([[100.0 + i]]), torch.tensor([[0.0]]))
    tables = [seq.table for seq in [parent, *children]]
    assert all(t[:2] == [0, 1] for t in tables)  # full blocks never move
    assert sorted(t[2] for t in tables) == [2, 3, 4, 5]  # 3 copies, the last in place
    assert pool.refs[:6] == [4, 4, 1, 1, 1, 1] and len(pool.free) == 10
    assert pool.refs == refs_from_tables(pool, [parent, *children])
    for i, seq in enumerate([parent, *children]):
        keys = seq.gather()[0].flatten().tolist()
        assert keys == [float(t) for t in range(10)] + [100.0 + i]


def test_a_fork_at_a_block_boundary_copies_nothing():
    pool = BlockPool(8, 4, 1, 1)
    parent = PagedSequence(pool)
    for t in range(8):
        parent.append(torch.tensor([[float(t)]]), torch.tensor([[float(t)]]))
    child = parent.fork()
    before = pool.k[:2].clone()
    parent.append(torch.tensor([[8.0]]), torch.tensor([[8.0]]))
    child.append(torch.tensor([[-8.0]]), torch.tensor([[-8.0]]))
    assert parent.table == [0, 1, 2] and child.table == [0, 1, 3]
    assert pool.refs[:4] == [2, 2, 1, 1] and torch.equal(pool.k[:2], before)


# The hardened cache: a drop-in KVCache


@pytest.mark.parametrize("n_kv", [4, 2, 1])
@pytest.mark.parametrize("block_size", [1, 3, 5, 16])
def test_a_layer_through_a_paged_cache_equals_the_preallocated_one(n_kv, block_size):
    torch.manual_seed(n_kv * 100 + block_size)
    layer = MultiHeadAttention(32, 4, n_kv, rope=True).double()
    x = torch.randn(2, 12, 32, dtype=F64)
    flat = layer.new_cache(2, 12)
    paged = PagedKVCache(2, n_kv, 12, 8, block_size=block_size, dtype=F64)
    assert isinstance(paged, KVCache)
    outs = {}
    for name, cache in (("flat", flat), ("paged", paged)):
        with torch.no_grad():
            outs[name] = torch.cat(
                [
                    layer(x[:, a:b], causal=True, cache=cache)
                    for a, b in [(0, 5), (5, 6), (6, 9), (9, 12)]
                ],
                dim=1,
            )
    assert torch.equal(outs["flat"], outs["paged"])
    assert torch.equal(paged.k, flat.k) and torch.equal(paged.v, flat.v)
    assert paged.next_pos == 12 and paged.blocks_used == 2 * math.ceil(12 / block_size)
    assert paged.pool.refs == refs_from_tables(paged.pool, paged.rows)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    gpt2 = gpt2_init_(
        gpt2_model(vocab_size=64, context=32, d_model=32, n_heads=4, n_layers=2),
        std=0.3,
    )
    llama = llama_model(
        vocab_size=64,
        context=32,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=64,
        std=0.2,
    )
    return gpt2.double().eval(), llama.double().eval()


def test_a_whole_model_with_padding_and_chunks_equals_the_preallocated_cache(models):
    ids = torch.randint(0, 64, (3, 7), generator=torch.Generator().manual_seed(1))
    valid = torch.arange(7) >= torch.tensor([0, 3, 5])[:, None]
    more = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(2))
    for model in models:
        runs = []
        for cache in (
            new_decode_cache(model, 3, 13),
            paged_decode_cache(model, 3, 13, block_size=3),
        ):
            with torch.no_grad():
                parts = [cached_run(model, ids[:, :4], cache, valid=valid[:, :4])]
                parts.append(cached_run(model, ids[:, 4:], cache, valid=valid[:, 4:]))
                parts += [
                    cached_run(model, more[:, t : t + 1], cache) for t in range(6)
                ]
            runs.append(torch.cat(parts, dim=1))
        assert torch.equal(runs[0], runs[1])


def test_reorder_moves_tables_not_keys_and_equals_the_preallocated_reorder():
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    flat = KVCache(4, 2, 20, 3, dtype=F64)
    paged = PagedKVCache(4, 2, 20, 3, block_size=3, dtype=F64)
    storage = paged.pool.k.data_ptr()
    for step in range(20):
        k = torch.randn(4, 2, 1 + (step == 0) * 4, 3, generator=g, dtype=F64)
        if paged.next_pos + k.shape[2] > 20:
            break
        flat.append(k, -k)
        paged.append(k, -k)
        rows = torch.tensor([rng.randrange(4) for _ in range(4)])
        used = paged.blocks_used
        flat.reorder(rows)
        paged.reorder(rows)
        assert paged.blocks_used <= used  # a reorder allocates nothing
        n = flat.next_pos
        assert torch.equal(paged.k, flat.k[:, :, :n]) and torch.equal(
            paged.v, flat.v[:, :, :n]
        )
        assert paged.pool.refs == refs_from_tables(paged.pool, paged.rows)
        free = set(paged.pool.free)
        assert all(paged.pool.refs[b] == 0 for b in free) and len(free) == len(
            paged.pool.free
        )
    assert paged.pool.k.data_ptr() == storage


def test_truncate_and_reset_give_blocks_back():
    paged = PagedKVCache(2, 1, 12, 2, block_size=4, dtype=F64)
    k = torch.randn(2, 1, 10, 2, dtype=F64)
    paged.append(k, k)
    assert paged.blocks_used == 6
    paged.truncate(5)
    assert paged.next_pos == 5 and paged.blocks_used == 4
    assert torch.equal(paged.k, k[:, :, :5])
    paged.append(k[:, :, 5:7], k[:, :, 5:7])
    assert torch.equal(paged.k, k[:, :, :7])
    forked = paged.fork([1, 1, 0])
    paged.reset()
    assert paged.next_pos == 0 and paged.owner is None
    assert forked.blocks_used == 4 and torch.equal(forked.k, k[[1, 1, 0], :, :7])
    forked.reset()
    assert forked.blocks_used == 0 and sorted(forked.pool.free) == list(range(6))


def test_a_failed_model_call_leaves_every_layer_as_it_was(models):
    """The last layer's pool is one block short: cached_run truncates the layers
    that wrote, and their blocks come back."""
    _, llama = models
    cache = paged_decode_cache(llama, 1, 12, block_size=4)
    cache.layers[1] = PagedKVCache(1, 2, 12, 8, block_size=4, n_blocks=2, dtype=F64)
    ids = torch.randint(0, 64, (1, 12))
    with torch.no_grad():
        cached_run(llama, ids[:, :8], cache)
        with pytest.raises(
            ValueError, match="needs 1 free blocks, the pool has 0 of n_blocks=2"
        ):
            cached_run(llama, ids[:, 8:], cache)
    assert [c.next_pos for c in cache.layers] == [8, 8]
    assert [c.blocks_used for c in cache.layers] == [2, 2]


def test_the_pool_size_check_is_exact_when_forks_share_a_partial_block():
    """Three rows share one partial block held by no one else: 2 copies, not 3."""
    parent = PagedKVCache(1, 1, 8, 1, block_size=4, n_blocks=4, dtype=F64)
    parent.append(
        torch.zeros(1, 1, 2, 1, dtype=F64), torch.zeros(1, 1, 2, 1, dtype=F64)
    )
    beams = parent.fork([0, 0, 0])
    parent.release()
    assert beams.blocks_needed(1) == 2 == len(beams.pool.free) - 1
    one = torch.ones(3, 1, 1, 1, dtype=F64)
    beams.append(one, one)
    assert beams.blocks_used == 3 and len(beams.pool.free) == 1
    # held by another cache too: every row copies
    other = beams.fork([0])
    assert beams.blocks_needed(1) == 1  # row 0's block is shared with `other`
    with pytest.raises(ValueError):
        beams.fork([0, 1]).append(one[:2], one[:2])  # needs 2 copies, 1 free
    assert other.next_pos == 3


def test_beam_search_on_forked_paged_caches_equals_beam_generate(models):
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(5))
    k, n = 3, 7
    for model in models:
        one = paged_decode_cache(model, 2, 6 + n, block_size=4, n_blocks=40)
        with torch.no_grad():
            logits = cached_run(model, ids, one, last=True)
        rows = [0] * k + [1] * k
        beams = DecodeCache([c.fork(rows) for c in one.layers])
        for c in one.layers:
            c.release()

        def step(tokens, beams=beams, model=model):
            return cached_run(model, tokens[:, None], beams, last=True)

        with torch.no_grad():
            found = beam_search(
                logits[rows], step, beams.reorder, beams=k, max_new_tokens=n
            )
        sequences, scores = beam_generate(model, ids, k, n)
        assert torch.equal(torch.cat((ids, found.tokens), dim=1), sequences)
        torch.testing.assert_close(found.scores, scores, rtol=0, atol=1e-12)
        for c in beams.layers:
            assert c.pool.refs == refs_from_tables(c.pool, c.rows)
            assert c.peak_blocks * 4 < 2 * k * (6 + n)


# Bad input


def test_bad_arguments_are_errors_that_name_them():
    with pytest.raises(ValueError, match="batch"):
        PagedKVCache(0, 1, 4, 2)
    with pytest.raises(TypeError, match="block_size"):
        PagedKVCache(1, 1, 4, 2, block_size=True)
    with pytest.raises(ValueError, match="n_blocks"):
        PagedKVCache(1, 1, 4, 2, n_blocks=0)
    with pytest.raises(TypeError, match="dtype"):
        PagedKVCache(1, 1, 4, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="pool must be a BlockPool"):
        PagedKVCache(1, 2, 4, 2, pool=BlockPool(2, 2, 1, 2))
    cache = PagedKVCache(2, 1, 4, 2, dtype=F64)
    with pytest.raises(ValueError, match="rows must be torch.long"):
        cache.reorder(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="rows must be rows of this cache"):
        cache.reorder(torch.tensor([0, 2]))
    with pytest.raises(ValueError, match=r"rows must be \[batch=2\]"):
        cache.reorder(torch.tensor([0]))
    with pytest.raises(TypeError, match="rows"):
        cache.fork([])
    with pytest.raises(ValueError, match="length must be <= next_pos=0"):
        cache.truncate(1)
    with pytest.raises(ValueError, match=r"the cache holds \[batch"):
        cache.append(
            torch.zeros(3, 1, 1, 2, dtype=F64), torch.zeros(3, 1, 1, 2, dtype=F64)
        )
    with pytest.raises(ValueError, match="needs capacity >= 5"):
        cache.append(
            torch.zeros(2, 1, 5, 2, dtype=F64), torch.zeros(2, 1, 5, 2, dtype=F64)
        )
    assert cache.next_pos == 0 and cache.blocks_used == 0  # nothing was written


def test_an_exhausted_pool_writes_nothing():
    cache = PagedKVCache(2, 1, 8, 1, block_size=2, n_blocks=3, dtype=F64)
    k = torch.ones(2, 1, 3, 1, dtype=F64)
    with pytest.raises(ValueError, match="needs 4 free blocks, the pool has 3"):
        cache.append(k, k)
    assert cache.next_pos == 0 and cache.blocks_used == 0


# Hugging Face's paged cache


def test_greedy_tokens_equal_hugging_face_continuous_batching():
    """Two prompts with a common prefix, greedy, float32: Hugging Face's
    `generate_batch` (its PagedAttentionCache, 4-token pages) and our Llama through
    paged caches of 4-token blocks choose the same tokens."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    theirs = LlamaForCausalLM(config).eval()
    ours = load_hf_llama(
        llama_from_hf_config(config).eval(), theirs.state_dict(), config
    )
    prompts = [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 9]]
    out = theirs.generate_batch(
        prompts,
        generation_config=GenerationConfig(
            do_sample=False, max_new_tokens=6, eos_token_id=-1, pad_token_id=0
        ),
        continuous_batching_config=ContinuousBatchingConfig(
            page_size=4,
            num_blocks=32,
            max_batch_tokens=64,
            use_cuda_graph=False,
            use_async_batching=False,
        ),
        max_new_tokens=6,
        warmup=False,
    )
    hf_tokens = [list(out[f"req_{i}"].generated_tokens) for i in range(2)]
    ids = torch.tensor(prompts)
    cache = paged_decode_cache(ours, 2, 13, block_size=4)
    tokens = []
    with torch.no_grad():
        logits = cached_run(ours, ids, cache, last=True)
        for _ in range(6):
            tokens.append(logits.argmax(dim=-1))
            logits = cached_run(ours, tokens[-1][:, None], cache, last=True)
    assert torch.stack(tokens, dim=1).tolist() == hf_tokens
    assert torch.equal(generate(ours, ids, 6)[:, 7:], torch.tensor(hf_tokens))
