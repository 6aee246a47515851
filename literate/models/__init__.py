"""One module per model family, built from the parts, with its Hugging Face config and checkpoint loading."""
