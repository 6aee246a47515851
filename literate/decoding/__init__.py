"""Choosing tokens and generating them: sampling, cached generation, beam search."""
