"""Hugging Face checkpoints with torch alone: a checked safetensors reader, any family
of this site loaded from a checkpoint directory by its config.json's `model_type`, and
the command the downloads run, `python llama.py generate CHECKPOINT_DIR --prompt ...`.

The minimal reader (`literate.minimal.checkpoint.load_safetensors`) is the format in 20
lines; `read_safetensors` is the same with the file checked first (a header that does
not parse, an unknown dtype, a tensor whose bytes do not match its shape, gaps or
overlaps, a Git LFS pointer in place of the file: a ValueError naming the file and the tensor) and refuses to run on a
big-endian machine, where the raw little-endian bytes would be read wrongly.
`checkpoint_state` reads a directory (one `model.safetensors` or the shards of its
index); `load_checkpoint` builds the family's model from config.json and loads the
weights with the family's own loader (whatever the loader refuses, e.g. a RoPE scaling
it does not implement, is refused here too). Tensors are memory-mapped: the file's
bytes are read as the model's parameters are filled from them and stay in the
system's page cache (reclaimable, but counted in the process's resident memory while
mapped); no second copy of the weights is made, except for a mixture of experts whose
files keep each expert apart (`stacked_experts` stacks them: one more copy of the
experts, in the file's dtype, while loading). `mmap.ACCESS_COPY` gives a writable
mapping (torch warns on a read-only buffer) whose pages are copied only if written,
which loading never does.

Text goes in and out through the checkpoint's `tokenizer.json` when the `tokenizers`
package is installed (imported by name, so that the downloads import only torch);
without it the command takes and prints token ids.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import mmap
import re
import struct
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn

from literate.decoding.generate import generate
from literate.decoding.sampling import greedy, sampler
from literate.models.families import FAMILIES

__all__ = ["SAFETENSORS_DTYPES", "safetensors_header", "tensor_span",
           "read_safetensors", "read_json",
           "checkpoint_directory", "checkpoint_config", "checkpoint_state",
           "stacked_experts", "load_experts_apart", "load_checkpoint",
           "checkpoint_tokenizer", "end_ids", "token_list", "checkpoint_command",
           "cached_decode", "MODEL_TYPES"]


# --8<-- [start:safetensors_dtypes]
SAFETENSORS_DTYPES = {  # the format's names for torch's dtypes
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
# --8<-- [end:safetensors_dtypes]


# --8<-- [start:read_safetensors]
def safetensors_header(path: Path, f: object, size: int) -> tuple[int, dict]:
    """(n, header) of an open .safetensors file of `size` bytes, checked."""
    if size < 8:
        raise ValueError(f"{path} is {size} bytes: too short for safetensors")
    first = f.read(8)
    if first == b"version ":  # "version https://git-lfs.github.com/spec/v1"
        raise ValueError(f"{path} is a Git LFS pointer, not the weights: fetch them "
                         "(git lfs pull, or hf download)")
    (n,) = struct.unpack("<Q", first)
    if n > size - 8:
        raise ValueError(f"{path}: header of {n} bytes in a file of {size}")
    try:
        header = json.loads(f.read(n))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: the header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    header.pop("__metadata__", None)  # free-form strings
    return n, header


def tensor_span(where: str, entry: object) -> tuple[torch.dtype, list[int], int, int]:
    """(dtype, shape, begin, end) of one header entry, checked: a known dtype, a
    shape of ints >= 0, and data_offsets [begin, end) spanning what the shape needs."""
    got = entry.get("dtype") if isinstance(entry, dict) else entry
    if not isinstance(got, str) or got not in SAFETENSORS_DTYPES:
        raise ValueError(f"{where} has dtype {got!r}; this reader knows "
                         f"{sorted(SAFETENSORS_DTYPES)}")
    dtype = SAFETENSORS_DTYPES[got]
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)
            and isinstance(offsets, list) and len(offsets) == 2
            and all(type(o) is int for o in offsets)):
        raise ValueError(f"{where}: shape {shape!r} and data_offsets {offsets!r} "
                         "must be lists of non-negative ints")
    begin, end = offsets
    if end - begin != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"{where}: bytes [{begin}, {end}) for the "
                         f"{math.prod(shape) * dtype.itemsize} bytes of shape {shape} "
                         f"{got}")
    return dtype, shape, begin, end


def read_safetensors(path: str | Path) -> dict[str, Tensor]:
    """{name: tensor} of one .safetensors file, memory-mapped, after checking its
    header (`safetensors_header`, `tensor_span`) and that the tensors' bytes tile the
    data, with neither gap nor overlap, as the format requires."""
    path = Path(path)
    if sys.byteorder != "little":
        raise ValueError("safetensors holds little-endian bytes; this machine is "
                         "big-endian")
    size = path.stat().st_size
    with open(path, "rb") as f:
        n, header = safetensors_header(path, f, size)
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # writable, lazy
    spans = {name: tensor_span(f"{path}: tensor {name!r}", entry)
             for name, entry in header.items()}
    covered = 0
    for name, (_, _, begin, end) in sorted(spans.items(), key=lambda s: s[1][2:]):
        if begin != covered:
            raise ValueError(f"{path}: tensor {name!r} starts at byte {begin} of the "
                             f"data, the tensors before it end at {covered}")
        covered = end
    if covered != size - 8 - n:
        raise ValueError(f"{path}: the tensors cover {covered} bytes of the data's "
                         f"{size - 8 - n}")
    tensors = {}
    for name, (dtype, shape, begin, end) in spans.items():
        count = (end - begin) // dtype.itemsize
        flat = (torch.frombuffer(data, dtype=dtype, count=count, offset=8 + n + begin)
                if count else torch.empty(0, dtype=dtype))
        tensors[name] = flat.reshape(shape)
    return tensors
# --8<-- [end:read_safetensors]


# --8<-- [start:checkpoint_files]
def read_json(path: Path, what: str) -> dict:
    """The JSON object in `path`, or a ValueError naming the file and what it is."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path.parent} has no {path.name} ({what})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} ({what}) is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} ({what}) is not a JSON object")
    return value


def checkpoint_directory(directory: object) -> Path:
    """`directory` as a Path to a directory, or a clear error."""
    if not isinstance(directory, (str, Path)):
        raise TypeError(f"directory must be a str or Path, got "
                        f"{type(directory).__name__}")
    if not Path(directory).is_dir():
        raise ValueError(f"checkpoint directory {str(directory)!r} is not a directory")
    return Path(directory)


def checkpoint_config(directory: str | Path) -> dict:
    """The config.json of a checkpoint directory, as a dict."""
    path = checkpoint_directory(directory) / "config.json"
    return read_json(path, "the model's configuration")
# --8<-- [end:checkpoint_files]


# --8<-- [start:checkpoint_state]
def checkpoint_state(directory: str | Path) -> dict[str, Tensor]:
    """Every tensor of a checkpoint directory, memory-mapped: one model.safetensors,
    or the shards model.safetensors.index.json maps each name to."""
    directory = checkpoint_directory(directory)
    index = directory / "model.safetensors.index.json"
    if index.exists():
        weight_map = read_json(index, "the shards' index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index} has no weight_map of tensor names to files")
        state = {}
        for file in sorted(set(weight_map.values())):
            tensors = read_safetensors(directory / file)
            for name in (k for k, v in weight_map.items() if v == file):
                if name not in tensors:
                    raise ValueError(f"{index} puts {name!r} in {file}, which does "
                                     "not hold it")
                state[name] = tensors[name]
        return state
    if (directory / "model.safetensors").exists():
        return read_safetensors(directory / "model.safetensors")
    pickled = sorted(p.name for p in directory.glob("*.bin"))
    hint = (f" (it has {pickled}: pickled weights; save them again with "
            "save_pretrained, which writes safetensors)" if pickled else "")
    raise ValueError(f"{directory} has neither model.safetensors nor "
                     f"model.safetensors.index.json{hint}")
# --8<-- [end:checkpoint_state]


# --8<-- [start:stacked_experts]
def stacked_experts(state: Mapping[str, Tensor], gate: str, up: str, down: str, *,
                    renames: tuple[tuple[str, str], ...] = ()) -> dict[str, Tensor]:
    """A mixture of experts' state dict as Hugging Face's models hold it (and ours
    load it), from the layout its files keep. In the files each expert's matrices are
    apart, `...experts.E.{gate}.weight` [I, d], `{up}` [I, d] and `{down}` [d, I]; in
    the model they are stacked: `...experts.gate_up_proj` [E, 2I, d] (every expert's
    gate rows, then its up rows) and `...experts.down_proj` [E, d, I]. `renames`
    (old, new) are applied to every name first (Mixtral's files say block_sparse_moe
    where its model says mlp). A state dict already stacked passes through."""
    apart = re.compile(rf"^(.*\.experts)\.(\d+)\.({gate}|{up}|{down})\.weight$")
    found: dict[str, dict[str, dict[int, Tensor]]] = {}
    out = {}
    for key, value in state.items():
        for old, new in renames:
            key = key.replace(old, new)
        match = apart.match(key)
        if match:  # prefix, expert, matrix
            expert = found.setdefault(match[1], {}).setdefault(match[3], {})
            expert[int(match[2])] = value
        else:
            out[key] = value
    for prefix, parts in found.items():
        n = len(parts.get(gate, {}))
        for name in (gate, up, down):
            if sorted(parts.get(name, {})) != list(range(n)):
                raise ValueError(f"{prefix}: the checkpoint has {name} for experts "
                                 f"{sorted(parts.get(name, {}))}, {gate} for {n}")
        gates, ups = (torch.stack([parts[k][e] for e in range(n)]) for k in (gate, up))
        out[prefix + ".gate_up_proj"] = torch.cat((gates, ups), dim=1)  # [E, 2I, d]
        out[prefix + ".down_proj"] = torch.stack([parts[down][e] for e in range(n)])
    return out


def load_experts_apart(load: Callable[..., nn.Module], ours: nn.Module,
                       state_dict: Mapping[str, Tensor], config: dict, *,
                       names: tuple[str, str, str],
                       renames: tuple[tuple[str, str], ...] = ()) -> nn.Module:
    """`load(ours, state_dict, config)` after the experts are stacked
    (`stacked_experts`): a family's loader, for its files."""
    return load(ours, stacked_experts(state_dict, *names, renames=renames), config)
# --8<-- [end:stacked_experts]


# --8<-- [start:load_checkpoint]
# model_type -> (config -> our model, (ours, state_dict, config) -> ours loaded)
Loaders = Mapping[str, tuple[Callable[[dict], nn.Module], Callable[..., nn.Module]]]


def load_checkpoint(directory: str | Path, loaders: Loaders) -> nn.Module:
    """Our model of the checkpoint in `directory`, built from its config.json by the
    loader of its `model_type` and loaded by name, in eval mode (float32, whatever
    dtype the checkpoint stores)."""
    config = checkpoint_config(directory)
    kind = config.get("model_type")
    if kind not in loaders:
        raise ValueError(f"{directory}: model_type {kind!r} is not one this file "
                         f"loads ({sorted(loaders)})")
    if config.get("quantization_config") is not None:  # gpt-oss's MXFP4, GPTQ, ...
        method = config["quantization_config"].get("quant_method", "quantized")
        raise ValueError(f"{directory}: the weights are {method!r}-quantized; this "
                         "file reads float weights (F32, F16, BF16) only")
    build, load = loaders[kind]
    model = build(config)
    load(model, checkpoint_state(directory), config)
    return model.eval()
# --8<-- [end:load_checkpoint]


# --8<-- [start:checkpoint_command]
def checkpoint_tokenizer(directory: Path) -> object | None:
    """The checkpoint's tokenizer.json, read by the `tokenizers` package if it is
    installed; None without either."""
    try:
        tokenizers = importlib.import_module("tokenizers")
    except ImportError:
        return None
    path = directory / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return tokenizers.Tokenizer.from_file(str(path))
    except Exception as error:  # the package raises a bare Exception
        raise ValueError(f"{path}: the tokenizers package cannot read it "
                         f"({error})") from None


def end_ids(directory: Path, config: dict) -> set[int]:
    """The end-of-sequence ids of a checkpoint: generation_config.json's, else
    config.json's (one id or a list)."""
    found = None
    if (directory / "generation_config.json").is_file():
        found = read_json(directory / "generation_config.json",
                          "generation settings").get("eos_token_id")
    found = config.get("eos_token_id") if found is None else found
    ids = found if isinstance(found, list) else [] if found is None else [found]
    if not all(type(i) is int for i in ids):
        raise ValueError(f"{directory}: eos_token_id must be an int or a list of "
                         f"ints, got {found!r}")
    return set(ids)


def token_list(text: str) -> list[int]:
    """'1,2,3' -> [1, 2, 3] (argparse's type for --ids)."""
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ids like 1,2,3") from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: ids are integers >= 0")
    return ids


def checkpoint_command(argv: list[str], *, prog: str,
                       load: Callable[[Path], nn.Module],
                       decode: Callable[..., Tensor]) -> int:
    """`generate CHECKPOINT_DIR (--prompt TEXT | --ids 1,2,3) [--max-new-tokens N]
    [--temperature T --top-k K --top-p P --seed S]`: load the checkpoint with `load`,
    decode with `decode(model, ids, n, temperature=, top_k=, top_p=, generator=)`,
    print the text (or the ids) and the speed. Decoding stops at max_new_tokens; the
    text is cut after the checkpoint's first end-of-sequence token."""
    parser = argparse.ArgumentParser(prog=f"python {prog}", description=(
        "Without a command: run the file's self-check. With `generate`: load a "
        "Hugging Face checkpoint directory (config.json and safetensors) and "
        "continue a prompt."))
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("generate", help="continue a prompt with a checkpoint")
    run.add_argument("checkpoint", type=Path, help="a directory with config.json and "
                     "model.safetensors (or its shards)")
    given = run.add_mutually_exclusive_group(required=True)
    given.add_argument("--prompt", help="text (needs `pip install tokenizers`)")
    given.add_argument("--ids", type=token_list, help="token ids, e.g. 1,2,3")
    run.add_argument("--max-new-tokens", type=int, default=32)
    run.add_argument("--temperature", type=float, default=0.0,
                     help="0 (the default): greedy; > 0: sample")
    run.add_argument("--top-k", type=int)
    run.add_argument("--top-p", type=float)
    run.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    args = parser.parse_args(argv)
    if args.max_new_tokens < 1 or args.temperature < 0:
        parser.error("--max-new-tokens must be >= 1 and --temperature >= 0")
    if args.temperature == 0 and (args.top_k is not None or args.top_p is not None):
        parser.error("--top-k and --top-p shape sampling: give a --temperature > 0")
    try:
        directory = checkpoint_directory(args.checkpoint)
        config = checkpoint_config(directory)
        tokenizer = checkpoint_tokenizer(directory)
        if args.prompt is not None and tokenizer is None:
            parser.error("--prompt needs the checkpoint's tokenizer.json and the "
                         "`tokenizers` package (pip install tokenizers); or give "
                         "token ids with --ids 1,2,3")
        prompt = (tokenizer.encode(args.prompt).ids if args.prompt is not None
                  else args.ids)
        vocab = config.get("vocab_size")
        if not prompt or isinstance(vocab, int) and max(prompt) >= vocab:
            parser.error(f"the prompt's ids {prompt} must be one or more, each below "
                         f"the checkpoint's vocab_size={vocab}")
        model = load(directory)
        generator = torch.Generator().manual_seed(args.seed)
        ids = torch.tensor([prompt])
        start = time.perf_counter()
        out = decode(model, ids, args.max_new_tokens, temperature=args.temperature,
                     top_k=args.top_k, top_p=args.top_p, generator=generator)
        seconds = time.perf_counter() - start
        ends = end_ids(directory, config)
    except (ValueError, TypeError, OSError) as error:
        print(f"python {prog}: error: {error}", file=sys.stderr)
        return 1
    new = out[0, len(prompt):].tolist()
    shown = next((new[:i + 1] for i, t in enumerate(new) if t in ends), new)
    if tokenizer is not None:
        print(tokenizer.decode(prompt + shown))
    print(f"new token ids: {shown}")
    print(f"{len(new)} tokens in {seconds:.2f} s ({len(new) / seconds:.1f} tokens/s, "
          "the prompt's prefill included)")
    return 0
# --8<-- [end:checkpoint_command]


# --8<-- [start:cached_decode]
def cached_decode(model: nn.Module, ids: Tensor, n: int, *, temperature: float = 0.0,
                  top_k: int | None = None, top_p: float | None = None,
                  generator: torch.Generator | None = None) -> Tensor:
    """Chapter 8's `generate` (the KV cache) for the command line: greedy at
    temperature 0, else chapter 6's sampler."""
    choose = greedy if temperature == 0 else sampler(
        temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
    return generate(model, ids, n, choose=choose)
# --8<-- [end:cached_decode]


# every family of the site by its model_type (the era files hold their own tables:
# literate.models.checkpoint_loaders)
MODEL_TYPES: dict[str, tuple[Callable, Callable]] = {
    f.model_type: (
        partial(f.function("from_hf_config"), **f.inference_options),
        partial(load_experts_apart, f.function("load"), names=f.experts_apart[:3],
                renames=f.experts_apart[3:]) if f.experts_apart else f.function("load"),
    )
    for f in FAMILIES
}
