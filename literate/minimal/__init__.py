"""The minimal version of every block the site teaches: plain PyTorch to paste.

No argument checks, no hooks for later chapters, no caches unless the block is about the
cache; keyword-only configuration and shape comments. Each is proven equal, forward and
backward, to the production layer (PyTorch's or Hugging Face's) and to the hardened
version in `literate.parts` / `literate.models` (tests/test_minimal_*.py). Nothing here
imports anything but torch, the standard library and other `literate.minimal` modules.
"""
