"""Transformer Blocks, literate: the code the site teaches and proves, in layers by role.

    parts     the building blocks the chapters teach (attention, positions, heads,
              caches, norms, FFNs, blocks, MoE, windows, sinks, latent attention)
    decoding  choosing and generating tokens (sampling, cached generate, beam search)
    models    one module per model family, with its Hugging Face loading; families.py
    numbers   counts, published configurations, the era table, the studies
    tools     benchmarks, the standalone exports and their self-checks, host syncs
    figures   plotting only
    site      how a page becomes a program, and the MkDocs hook

A module imports only from its own layer or the layers above it in this list
(tests/test_layout.py).
"""
