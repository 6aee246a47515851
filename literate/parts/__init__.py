"""The building blocks the chapters teach: attention, positions, heads, caches, norms, FFNs, blocks, MoE, windows, sinks, latent attention."""
