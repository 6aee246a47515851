"""A paged key/value cache: fixed-size blocks, a table per sequence, shared blocks.

A preallocated cache (`KVCache`) reserves `capacity` slots per row for the row's whole
life, filled or not, and gives every row its own copy of every token, so k beams (or k
requests with one prompt) hold k copies of the prompt's keys and values. PagedAttention
(Kwon et al. 2023, sec. 4) stores them as an operating system stores pages: a **pool**
of physical blocks of `block_size` tokens each, `[n_blocks, block_size, H_kv, d_head]`
for keys and for values, and for each sequence a **block table**, the list of its
physical blocks in order. Token t lives in block `table[t // block_size]`, slot
`t % block_size` (sec. 4.2). A sequence takes a new block only when its last one is
full, so it wastes fewer than `block_size` slots. A **fork** (a new beam, a request with
the same prompt) copies the table, not the blocks; each block counts the tables that
hold it, and a sequence about to write into a block that another table holds first
copies it (copy-on-write, sec. 4.4). Only a sequence's last block can be partly filled,
so only that block is ever copied.

* `BlockPool` and `PagedSequence`: the minimal version, plain PyTorch, no checks.
* `PagedKVCache`: a `KVCache` whose rows are paged sequences of one pool, a drop-in
  cache for one `MultiHeadAttention` (and, one per layer, inside a `DecodeCache`), with
  the checks of the preallocated cache, the pool's size checked before anything is
  written, and `reorder` (beam search) that moves tables, not keys.

The attention here reads the keys gathered into one tensor, `[B, H_kv, T, d_head]` (a
copy): PyTorch's attention reads one contiguous tensor. vLLM's kernel reads the blocks
in place through the table (sec. 4.1).

Shapes: B rows, H_kv stored heads, T tokens, d_head head width.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch import Tensor

from literate.parts.cache import KVCache
from literate.parts.checks import float_dtype, non_negative_int, positive_int

__all__ = ["BlockPool", "PagedSequence", "PagedKVCache"]


# --8<-- [start:block_pool]
class BlockPool:
    """Keys and values in blocks `[n_blocks, block_size, H_kv, d_head]`, the
    free ones, and how many block tables hold each (Kwon et al. 2023, sec. 4.2)."""

    def __init__(self, n_blocks: int, block_size: int, n_kv_heads: int, d_head: int,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        shape = (n_blocks, block_size, n_kv_heads, d_head)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size, self.refs = block_size, [0] * n_blocks
        self.free = list(range(n_blocks))[::-1]  # pop() hands out block 0 first

    def allocate(self) -> int:
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def release(self, block: int) -> None:
        self.refs[block] -= 1
        if self.refs[block] == 0:  # no table holds it: free again
            self.free.append(block)
# --8<-- [end:block_pool]


# --8<-- [start:paged_sequence]
class PagedSequence:
    """One sequence: its block table (logical block i -> physical block), its length."""

    def __init__(self, pool: BlockPool, table: list[int] | tuple = (), length=0):
        self.pool, self.table, self.length = pool, list(table), length  # a copy

    def append(self, k: Tensor, v: Tensor) -> None:  # one token: [H_kv, d_head] each
        pool, slot = self.pool, self.length % self.pool.block_size
        if slot == 0:  # no block yet, or the last one is full: take a new one
            self.table.append(pool.allocate())
        elif pool.refs[self.table[-1]] > 1:  # shared: copy it before writing
            old, new = self.table[-1], pool.allocate()
            pool.k[new], pool.v[new] = pool.k[old], pool.v[old]
            pool.release(old)
            self.table[-1] = new
        pool.k[self.table[-1], slot], pool.v[self.table[-1], slot] = k, v
        self.length += 1

    def gather(self) -> tuple[Tensor, Tensor]:  # [H_kv, length, d_head] each, a copy
        return tuple(x[self.table].flatten(0, 1)[:self.length].transpose(0, 1)
                     for x in (self.pool.k, self.pool.v))  # from [T, H_kv, d_head]

    def fork(self) -> "PagedSequence":  # the table is copied, the blocks shared
        for block in self.table:
            self.pool.refs[block] += 1
        return PagedSequence(self.pool, self.table, self.length)
# --8<-- [end:paged_sequence]


# --8<-- [start:paged_kv_cache]
def row_list(rows: object, batch: int) -> list[int]:
    """`rows` (a torch.long [N] tensor, or a list of ints) as a list of ints, each a
    row < batch."""
    if isinstance(rows, Tensor):
        if rows.dtype != torch.long or rows.ndim != 1:
            raise ValueError(f"rows must be torch.long [N], got {rows.dtype} "
                             f"{tuple(rows.shape)}")
        rows = rows.tolist()  # the block tables live on the host, as vLLM's do
    if not isinstance(rows, (list, tuple)) or not rows:
        raise TypeError(f"rows must be a non-empty list of ints or a torch.long "
                        f"tensor, got {type(rows).__name__}")
    for r in rows:
        if non_negative_int("rows[i]", r) >= batch:
            raise ValueError(f"rows must be rows of this cache, < batch={batch}, "
                             f"got {r}")
    return list(rows)


class PagedKVCache(KVCache):
    """A `KVCache` whose `batch` rows are `PagedSequence`s of one `BlockPool`: a
    drop-in cache for one `MultiHeadAttention` (one per layer in a `DecodeCache`).

    `capacity` is the most tokens a row may hold (what the layer and `DecodeCache`
    check), not memory: memory is the pool, `n_blocks` blocks of `block_size`
    tokens (default: enough for every row at full capacity). A row takes a block
    when its last one is full; `fork(rows)` makes a cache whose row i continues
    row rows[i], sharing its blocks; `reorder(rows)` does so in place (beam search)
    and copies no key. A write that needs more blocks than are free is an error
    before anything is written. `KVCache.__init__` is not called: its contiguous
    buffers are what this replaces.
    """

    def __init__(self, batch: int, n_kv_heads: int, capacity: int, d_head: int, *,
                 block_size: int = 16, n_blocks: int | None = None,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None,
                 pool: BlockPool | None = None) -> None:
        shape = (positive_int("batch", batch),
                 positive_int("n_kv_heads", n_kv_heads),
                 positive_int("capacity", capacity), positive_int("d_head", d_head))
        if pool is None:
            size = positive_int("block_size", block_size)
            need = batch * -(-capacity // size)  # every row at full capacity
            n = need if n_blocks is None else positive_int("n_blocks", n_blocks)
            pool = BlockPool(n, size, n_kv_heads, d_head,
                             float_dtype("dtype", dtype), device)
        elif not isinstance(pool, BlockPool) or pool.k.shape[2:] != shape[1::2]:
            raise ValueError(f"pool must be a BlockPool of [n_kv_heads, d_head] = "
                             f"{list(shape[1::2])}")
        self.pool, self.rows = pool, [PagedSequence(pool) for _ in range(batch)]
        self.batch, self.n_kv_heads, self.capacity, self.d_head = shape
        self.dtype, self.device = pool.k.dtype, pool.k.device
        self.next_pos, self.owner, self.peak_blocks = 0, None, 0

    @property
    def nbytes(self) -> int:
        """Bytes of the pool's two buffers, every block, in use or not."""
        return self.pool.k.nbytes + self.pool.v.nbytes

    @property
    def blocks_used(self) -> int:
        """Blocks some table holds: what the pool's sequences cost now."""
        return len(self.pool.refs) - len(self.pool.free)

    @property
    def k(self) -> Tensor:
        """Every row's keys in order, [B, H_kv, next_pos, d_head] (a copy)."""
        return torch.stack([row.gather()[0] for row in self.rows])

    @property
    def v(self) -> Tensor:
        """Every row's values in order, [B, H_kv, next_pos, d_head] (a copy)."""
        return torch.stack([row.gather()[1] for row in self.rows])

    def blocks_needed(self, new: int) -> int:
        """Blocks that appending `new` tokens to every row takes from the pool: new
        blocks, and the copies of shared last blocks (a block held only by rows of
        this cache is copied for all of them but the last)."""
        size, held = self.pool.block_size, Counter()
        fresh = sum(-(-(row.length + new) // size) - len(row.table)
                    for row in self.rows)
        if self.next_pos % size and new:
            held.update(row.table[-1] for row in self.rows)
        copies = sum(n - 1 + (self.pool.refs[b] > n) for b, n in held.items())
        return fresh + copies

    def write(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Append `[B, H_kv, T, d_head]` token by token to each row (checked by
        the layer's `check_call`, or by `append`); return every key and value."""
        need, free = self.blocks_needed(k_new.shape[2]), len(self.pool.free)
        if need > free:
            raise ValueError(f"this write needs {need} free blocks, the pool has "
                             f"{free} of n_blocks={len(self.pool.refs)}: make a "
                             "larger pool, or free sequences (reset)")
        for row, seq in enumerate(self.rows):
            for t in range(k_new.shape[2]):
                seq.append(k_new[row, :, t], v_new[row, :, t])
        self.next_pos += k_new.shape[2]
        self.peak_blocks = max(self.peak_blocks, self.blocks_used)
        return self.k, self.v

    def fork(self, rows: Tensor | list[int]) -> "PagedKVCache":
        """A cache on the same pool whose row i continues row rows[i]: the tables
        are copied, the blocks shared (a beam, a request with the same prompt)."""
        rows = row_list(rows, self.batch)
        child = PagedKVCache(len(rows), self.n_kv_heads, self.capacity, self.d_head,
                             pool=self.pool)
        child.rows = [self.rows[r].fork() for r in rows]
        child.next_pos, child.peak_blocks = self.next_pos, self.blocks_used
        return child

    def release(self) -> None:
        """Give back every block this cache's rows hold; the rows become empty."""
        for seq in self.rows:
            for block in seq.table:
                self.pool.release(block)
        self.rows = [PagedSequence(self.pool) for _ in self.rows]

    def reorder(self, rows: Tensor) -> None:
        """Row i becomes a fork of row rows[i] [B] (beam search), in place:
        tables are moved and blocks counted, no key or value is copied."""
        rows = row_list(rows, self.batch)
        if len(rows) != self.batch:
            raise ValueError(f"rows must be [batch={self.batch}], got "
                             f"{len(rows)} rows")
        forks = [self.rows[r].fork() for r in rows]  # before the old ones let go
        self.release()
        self.rows = forks

    def truncate(self, length: int) -> None:
        """Forget every position from `length` on; blocks past it are given back."""
        if non_negative_int("length", length) > self.next_pos:
            raise ValueError(f"length must be <= next_pos={self.next_pos}, "
                             f"got {length}")
        keep = -(-length // self.pool.block_size)
        for seq in self.rows:
            for block in seq.table[keep:]:
                self.pool.release(block)
            seq.table, seq.length = seq.table[:keep], length
        self.next_pos = length

    def reset(self) -> None:
        """Forget the sequences and the layer: every block given back,
        `next_pos` 0."""
        self.release()
        self.next_pos, self.owner, self.peak_blocks = 0, None, 0
# --8<-- [end:paged_kv_cache]
