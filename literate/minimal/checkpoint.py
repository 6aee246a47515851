"""Reading a Hugging Face checkpoint with the standard library and torch: the
safetensors format, and the quick path's Llama or Qwen3 from a checkpoint directory.

A `.safetensors` file is an 8-byte little-endian length n, a JSON header of n bytes
({name: {"dtype", "shape", "data_offsets": [begin, end]}}, plus an optional
"__metadata__"), then the tensors' raw little-endian bytes back to back, offsets counted
from the end of the header. A directory holds `config.json` and either one
`model.safetensors` or shards listed by `model.safetensors.index.json` ("weight_map":
name -> file). Memory-mapped, a tensor's bytes are read from disk when they are first
touched (and then sit in the system's page cache): loading makes no copy of the
weights but the model's own.
"""

from __future__ import annotations

import json
import mmap
import struct
from pathlib import Path

import torch

from literate.minimal.generate import generate
from literate.minimal.llama import LlamaModel, load_hf_llama

# --8<-- [start:safetensors_dtypes]
SAFETENSORS_DTYPES = {  # the format's names for torch's dtypes
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
# --8<-- [end:safetensors_dtypes]


# --8<-- [start:load_safetensors]
def tensor_at(data, start, entry):
    """One tensor of a safetensors file: bytes start + [begin, end) of `data`."""
    dtype = SAFETENSORS_DTYPES[entry["dtype"]]
    begin, end = entry["data_offsets"]  # counted from the end of the header
    count = (end - begin) // dtype.itemsize
    if count == 0:  # torch.frombuffer refuses to read no bytes
        return torch.empty(entry["shape"], dtype=dtype)
    flat = torch.frombuffer(data, dtype=dtype, count=count, offset=start + begin)
    return flat.reshape(entry["shape"])


def load_safetensors(path):
    """{name: tensor} of a .safetensors file, memory-mapped: read when first used."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))  # the header's length in bytes
        header = json.loads(f.read(n))
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # the whole file
    header.pop("__metadata__", None)  # free-form strings, not a tensor
    return {name: tensor_at(data, 8 + n, entry) for name, entry in header.items()}
# --8<-- [end:load_safetensors]


# --8<-- [start:load_checkpoint]
QUICK_MODEL_TYPES = ("llama", "qwen3")  # the config.json model_types it builds


def checkpoint_tensors(directory):
    """Every tensor of a checkpoint directory: one model.safetensors, or the shards
    its model.safetensors.index.json names."""
    directory = Path(directory)
    index = directory / "model.safetensors.index.json"
    if not index.exists():
        return load_safetensors(directory / "model.safetensors")
    files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    tensors = {}
    for file in files:
        tensors.update(load_safetensors(directory / file))
    return tensors


def quick_model_settings(config):
    """LlamaModel's keywords for a Llama or Qwen3 config.json (a dict)."""
    rope = config.get("rope_parameters") or config  # transformers 5 / older files
    scaling = (config.get("rope_scaling") or rope).get("rope_type", "default")
    if scaling != "default":
        raise ValueError(f"RoPE scaling {scaling!r} is not in the quick path")
    heads = config["num_attention_heads"]
    return dict(vocab_size=config["vocab_size"], d_model=config["hidden_size"],
                n_layers=config["num_hidden_layers"], n_heads=heads,
                n_kv_heads=config.get("num_key_value_heads") or heads,
                d_ff=config["intermediate_size"], d_head=config.get("head_dim"),
                rope_base=rope.get("rope_theta", 10000.0), eps=config["rms_norm_eps"],
                qk_norm=config["model_type"] == "qwen3",
                tied=config.get("tie_word_embeddings", False))


def quick_model_from_checkpoint(directory):
    """The quick path's LlamaModel for a Llama or Qwen3 checkpoint directory, weights
    loaded, in eval mode (float32)."""
    config = json.loads((Path(directory) / "config.json").read_text())
    if config["model_type"] not in QUICK_MODEL_TYPES or "quantization_config" in config:
        raise ValueError(f"the quick path builds unquantized {QUICK_MODEL_TYPES}, not "
                         f"this {config['model_type']!r}")
    model = LlamaModel(**quick_model_settings(config))
    tensors = checkpoint_tensors(directory)
    if config.get("tie_word_embeddings", False):  # the embedding is the head
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    return load_hf_llama(model, tensors).eval()
# --8<-- [end:load_checkpoint]


# --8<-- [start:quick_decode]
def quick_decode(model, ids, n, *, temperature=0.0, top_k=None, top_p=None,
                 generator=None):
    """The quick path's `generate` for the command line: greedy, or sampled at a
    temperature (no top-k or top-p here: the chapters' sampler has them)."""
    if top_k is not None or top_p is not None:
        raise ValueError("the quick path samples at a temperature only: leave out "
                         "--top-k and --top-p, or use an era's file")
    return generate(model, ids, max_new_tokens=n, temperature=temperature,
                    generator=generator)
# --8<-- [end:quick_decode]
