"""Hugging Face checkpoints read with torch alone (literate/minimal/checkpoint.py,
literate/models/checkpoint.py) and the `generate` command of the downloads.

* Both safetensors readers give what the `safetensors` package gives, tensor for tensor
  and bit for bit, on every dtype the format has here (empty and 0-d tensors too); the
  checked one refuses a damaged file naming the tensor.
* Every family of `FAMILIES` saved by `save_pretrained` (a tiny random model, float32;
  some sharded and in bfloat16) loads by its `model_type` in an interpreter where
  `transformers` cannot be imported; its logits equal Hugging Face's within float32
  rounding and its greedy tokens with the KV cache are Hugging Face's `generate`'s.
* Each era file's `generate` command, run alone, prints the tokens Hugging Face's
  `generate` gives; through a tokenizer trained here with `tokenizers`, the text too.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
import safetensors.torch
import torch
import transformers

import literate.models.checkpoint as hardened
from literate.minimal.checkpoint import SAFETENSORS_DTYPES, load_safetensors
from literate.models.checkpoint import (
    MODEL_TYPES,
    checkpoint_command,
    checkpoint_state,
    load_experts_apart,
    read_safetensors,
)
from literate.models.checkpoint_loaders import (
    GPT2_CHECKPOINTS,
    LONG_CONTEXT_CHECKPOINTS,
)
from literate.models.families import FAMILIES
from literate.tools.bench.models import configuration
from literate.tools.era_files import checkpoint_model_types
from literate.tools.export import ERAS, assemble

from harness import F32_BOUND, randomise_, run_in_fresh_interpreters

ROOT = Path(__file__).resolve().parents[1]
# tiny models, with the family's own settings from the benchmarks' table
SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "vocab_size": 300,
    "max_position_embeddings": 256,
    "attn_implementation": "eager",
}
PROMPT = [[5, 17, 42, 99, 7, 250, 3]]
NEW = 6
# (folder, family, save_pretrained options): every family in float32, one file; two
# in bfloat16 and in shards of a few kilobytes
SAVED = [(f.name, f, {}) for f in FAMILIES] + [
    ("llama_bf16_shards", "llama", {"dtype": torch.bfloat16, "shard": "40KB"}),
    ("gemma3_bf16", "gemma3", {"dtype": torch.bfloat16}),
    ("mixtral_shards", "mixtral", {"shard": "30KB"}),
]


def hf_model(row) -> transformers.PreTrainedModel:
    torch.manual_seed(0)
    config = getattr(transformers, row.hf_config)(**(configuration(row) | SMALL))
    model = getattr(transformers, row.hf_model)(config)
    return randomise_(model, seed=1, scale=0.1).eval()  # every gain and bias random


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """Each checkpoint of SAVED in a folder of its own."""
    rows = {f.name: f for f in FAMILIES}
    root = tmp_path_factory.mktemp("checkpoints")
    folders = {}
    for name, row, options in SAVED:
        model = hf_model(rows[row] if isinstance(row, str) else row)
        if "dtype" in options:
            model = model.to(options["dtype"])
        folders[name] = root / name
        model.save_pretrained(folders[name], max_shard_size=options.get("shard", "5GB"))
    return folders


def hf_reference(folder: Path) -> tuple[torch.Tensor, list[int]]:
    """Hugging Face's logits of PROMPT and greedy tokens, from the saved checkpoint
    (read back in float32: a bfloat16 file's values, as ours reads them)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32
    ).eval()
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        logits = model(ids).logits
        out = model.generate(
            ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0
        )
    return logits, out[0, len(PROMPT[0]) :].tolist()


LOAD_ALONE = """
import json, sys, torch
sys.modules["transformers"] = None  # an import of it fails: the reader must not need it
from literate.decoding.generate import generate
from literate.models.checkpoint import MODEL_TYPES, load_checkpoint
results = {}
ids = torch.tensor(json.loads(sys.argv[1]))
for name, folder in json.loads(sys.argv[2]).items():
    model = load_checkpoint(folder, MODEL_TYPES)
    with torch.no_grad():
        logits = model(ids)
    tokens = generate(model, ids, int(sys.argv[3]))[0, ids.shape[1]:].tolist()
    results[name] = {"logits": logits.tolist(), "tokens": tokens}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def loaded_alone(saved, tmp_path_factory) -> dict:
    """Every saved checkpoint loaded by `load_checkpoint` in an interpreter that has
    imported nothing but torch and cannot import transformers."""
    folders = {name: str(path) for name, path in saved.items()}
    job = {
        "name": "load",
        "code": LOAD_ALONE,
        "argv": [json.dumps(PROMPT), json.dumps(folders), str(NEW)],
        "cwd": str(tmp_path_factory.mktemp("alone")),
    }
    run = run_in_fresh_interpreters([job], tmp_path_factory.mktemp("jobs"))["load"]
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("name", [s[0] for s in SAVED])
def test_every_family_loads_alone_and_decodes_as_transformers(
    name, saved, loaded_alone
):
    logits, tokens = hf_reference(saved[name])
    ours = loaded_alone[name]
    # float32 both sides, the same weights: rounding of the same sums in another order
    limit = F32_BOUND * logits.abs().max().item()
    assert (torch.tensor(ours["logits"]) - logits).abs().max().item() <= limit
    assert ours["tokens"] == tokens


def test_the_site_loads_every_family_and_the_downloads_split_them():
    assert sorted(MODEL_TYPES) == sorted(f.model_type for f in FAMILIES)
    assert all(f.model_type for f in FAMILIES)
    files = {**GPT2_CHECKPOINTS, **LONG_CONTEXT_CHECKPOINTS}
    assert sorted(files) == sorted(MODEL_TYPES)
    for kind, (build, load) in files.items():  # the family's own functions
        row = next(f for f in FAMILIES if f.model_type == kind)
        assert getattr(build, "func", build) is row.function("from_hf_config")
        if row.experts_apart:  # read through stacked_experts, with the row's names
            assert load.func is load_experts_apart and load.args[0] is row.function(
                "load"
            )
            assert load.keywords["names"] == row.experts_apart[:3]
            assert load.keywords.get("renames", ()) == row.experts_apart[3:]
        else:
            assert load is row.function("load")


# --- the safetensors format


def every_dtype() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for code, dtype in SAFETENSORS_DTYPES.items():
        if dtype.is_floating_point:
            x = torch.randn(3, 5, generator=g, dtype=torch.float64).to(dtype)
        elif dtype == torch.bool:
            x = torch.rand(3, 5, generator=g) > 0.5
        else:
            info = torch.iinfo(dtype)
            x = torch.randint(info.min, info.max, (3, 5), generator=g, dtype=dtype)
        tensors[code] = x
    tensors["empty"] = torch.zeros(0, 4)
    tensors["scalar"] = torch.tensor(2.5, dtype=torch.bfloat16)
    tensors["transposed"] = torch.arange(12.0).reshape(3, 4).t().contiguous()
    return tensors


def test_the_two_readers_know_the_same_dtypes():  # each page's table, one format
    assert hardened.SAFETENSORS_DTYPES == SAFETENSORS_DTYPES


@pytest.mark.parametrize("reader", [load_safetensors, read_safetensors])
def test_both_readers_equal_the_safetensors_package_on_every_dtype(reader, tmp_path):
    path = tmp_path / "all.safetensors"
    safetensors.torch.save_file(every_dtype(), path, metadata={"format": "pt"})
    theirs = safetensors.torch.load_file(path)
    ours = reader(path)
    assert sorted(ours) == sorted(theirs)
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and ours[name].shape == tensor.shape
        assert torch.equal(
            ours[name].view(-1).view(torch.uint8), tensor.view(-1).view(torch.uint8)
        ), name  # bit for bit


def damaged(path: Path, header: dict, data: bytes = b"\0" * 16) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


F32_AT = {"dtype": "F32", "shape": [2]}  # 8 bytes


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (
            {"w": {"dtype": "F8_E9", "shape": [2], "data_offsets": [0, 2]}},
            r"'w' has dtype 'F8_E9'",
        ),
        (
            {"w": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}},
            r"'w' has dtype \['F32'\]",
        ),
        (
            {"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}},
            r"the tensors cover 32 bytes of the data's 16",
        ),
        (
            {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}},
            r"'w': bytes \[0, 16\) for the 12 bytes of shape \[3\] F32",
        ),
        (
            {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
            r"'w': shape \[-1\]",
        ),
        (  # two tensors on the same bytes
            {
                "a": F32_AT | {"data_offsets": [0, 8]},
                "b": F32_AT | {"data_offsets": [0, 8]},
            },
            r"tensor 'b' starts at byte 0 of the data, the tensors before it end at 8",
        ),
        (  # a gap between them
            {
                "a": F32_AT | {"data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]},
            },
            r"tensor 'b' starts at byte 12 .* end at 8",
        ),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_damaged_file_is_refused_naming_the_tensor(header, message, tmp_path):
    path = damaged(tmp_path / "bad.safetensors", header)
    with pytest.raises(ValueError, match=message):
        read_safetensors(path)


def test_a_truncated_or_unparsable_file_is_refused(tmp_path):
    (tmp_path / "short.safetensors").write_bytes(b"\1\2")
    with pytest.raises(ValueError, match="too short for safetensors"):
        read_safetensors(tmp_path / "short.safetensors")
    (tmp_path / "long.safetensors").write_bytes(struct.pack("<Q", 99) + b"{}")
    with pytest.raises(ValueError, match="header of 99 bytes in a file of 10"):
        read_safetensors(tmp_path / "long.safetensors")
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 9\n"
    (tmp_path / "lfs.safetensors").write_bytes(pointer)
    with pytest.raises(ValueError, match="is a Git LFS pointer, not the weights"):
        read_safetensors(tmp_path / "lfs.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(ValueError, match="the header is not JSON"):
        read_safetensors(tmp_path / "junk.safetensors")


def test_a_directory_is_read_whole_or_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="is not a directory"):
        checkpoint_state(tmp_path / "nowhere")
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"pickled weights.*save_pretrained"):
        checkpoint_state(tmp_path)
    safetensors.torch.save_file({"a": torch.ones(2)}, tmp_path / "one.safetensors")
    index = {"weight_map": {"a": "one.safetensors", "b": "one.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="puts 'b' in one.safetensors"):
        checkpoint_state(tmp_path)
    index["weight_map"].pop("b")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert torch.equal(checkpoint_state(tmp_path)["a"], torch.ones(2))


def test_a_sharded_checkpoint_reads_as_its_single_file(saved):
    sharded = checkpoint_state(saved["mixtral_shards"])
    single = checkpoint_state(saved["mixtral"])
    assert len(list(saved["mixtral_shards"].glob("*.safetensors"))) > 2
    assert sorted(sharded) == sorted(single)
    assert all(torch.equal(sharded[k], single[k]) for k in single)


# --- the command


def command(argv: list[str], capsys) -> tuple[int, str, str]:
    code = checkpoint_command(
        argv,
        prog="gpt2.py",
        load=lambda d: __import__(
            "literate.models.checkpoint"
        ).models.checkpoint.load_checkpoint(d, GPT2_CHECKPOINTS),
        decode=lambda *a, **k: torch.zeros(1, 9, dtype=torch.long),
    )
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_command_refuses_what_it_cannot_do_by_name(saved, capsys, tmp_path):
    code, _, err = command(["generate", str(saved["llama"]), "--ids", "1,2"], capsys)
    assert code == 1 and "model_type 'llama' is not one this file loads" in err
    code, _, err = command(["generate", str(tmp_path), "--ids", "1"], capsys)
    assert code == 1 and "has no config.json" in err
    config = {"model_type": "gpt2", "quantization_config": {"quant_method": "mxfp4"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, _, err = command(["generate", str(tmp_path), "--ids", "1"], capsys)
    assert code == 1 and "the weights are 'mxfp4'-quantized" in err
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "tokenizer.json").write_text("{not json")
    code, _, err = command(["generate", str(tmp_path), "--ids", "1"], capsys)
    assert code == 1 and "tokenizer.json: the tokenizers package cannot read it" in err
    for argv, message in [
        (["--prompt", "hi"], "needs the checkpoint's tokenizer.json"),
        (["--ids", "1,x"], "is not ids like 1,2,3"),
        (["--ids", "1,300"], "below the checkpoint's vocab_size=300"),
        (["--ids", "1", "--top-k", "3"], "give a --temperature > 0"),
        (["--ids", "1", "--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    ]:
        with pytest.raises(SystemExit) as exited:
            command(["generate", str(saved["gpt2"]), *argv], capsys)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err, argv


def trained_tokenizer(vocab: int):
    """A byte-level BPE tokenizer trained here (no download), `vocab` ids at most."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    text = ["the cat sat on the mat", "every block reads every token"] * 20
    tokenizer.train_from_iterator(text, trainer)
    return tokenizer


# (era file, checkpoint folder, with the tokenizer)
COMMANDS = [
    ("gpt2", "gpt2", False),
    ("llama", "llama_bf16_shards", True),
    ("quick", "llama", True),
    ("mixtral", "mixtral", False),
    ("long_context", "gemma3", False),
]


def test_each_download_generates_the_tokens_of_transformers(saved, tmp_path):
    tokenizer = trained_tokenizer(SMALL["vocab_size"])
    jobs, expected = [], {}
    for era, folder, text in COMMANDS:
        path = tmp_path / f"{era}.py"
        path.write_text(assemble(era), encoding="utf-8")
        if text:
            tokenizer.save(str(saved[folder] / "tokenizer.json"))
            given = ["--prompt", "the cat sat"]
            prompt = tokenizer.encode("the cat sat").ids
        else:
            given, prompt = ["--ids", ",".join(map(str, PROMPT[0]))], PROMPT[0]
        argv = ["generate", str(saved[folder]), *given, "--max-new-tokens", str(NEW)]
        jobs.append(
            {
                "name": era,
                "code": "import runpy, sys\nrunpy.run_path(sys.argv.pop(1), "
                "run_name='__main__')",
                "argv": [str(path), *argv],
                "cwd": str(tmp_path),
            }
        )
        model = transformers.AutoModelForCausalLM.from_pretrained(saved[folder]).eval()
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=NEW,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
        expected[era] = (prompt, out[0, len(prompt) :].tolist(), text)
    runs = run_in_fresh_interpreters(jobs, tmp_path)
    for era, (prompt, tokens, text) in expected.items():
        run = runs[era]
        assert run.returncode == 0, (era, run.stderr[-2000:])
        assert f"new token ids: {tokens}" in run.stdout, (era, run.stdout)
        assert re.search(rf"{NEW} tokens in [0-9.]+ s \([0-9.]+ tokens/s", run.stdout)
        if text:
            assert run.stdout.splitlines()[0] == tokenizer.decode(prompt + tokens)


def test_the_files_without_a_command_still_run_their_self_check():
    for era in ("gpt2", "llama", "mixtral", "long_context", "quick"):
        assert ERAS[era].command is not None
        main = assemble(era).split('if __name__ == "__main__":')[1]
        assert main.index("sys.exit(checkpoint_command(") < main.index(
            f"{ERAS[era].self_check}()"
        )
        assert "if len(sys.argv) > 1:" in main


def test_the_home_page_says_which_checkpoints_each_download_loads():
    """Each download's item on the home page names the model_types its command loads:
    all of them, or those it adds to the file it builds on ("also loads")."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    items = re.split(r"\n- ", text.split("## The downloads")[1].split("\n\n")[2])
    said = {}
    for item in items:
        name = re.search(r"\[(\w+)\.py\]", item)[1]
        listed = re.search(
            r"loads (?:checkpoints of model_type )?(.*?)[;.]\s*$", item, re.S
        )
        said[name] = re.findall(r"`(\w+)`", listed[1]) if listed else []
    for name, era in ERAS.items():
        loads = checkpoint_model_types(era)
        base = {"mixtral": "llama", "long_context": "mixtral"}.get(name)
        before = set(checkpoint_model_types(ERAS[base])) if base else set()
        assert said[name] == [k for k in loads if k not in before], name


def test_end_of_sequence_ids_are_read_and_checked(tmp_path):
    from literate.models.checkpoint import end_ids

    assert end_ids(tmp_path, {"eos_token_id": 7}) == {7}
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [1, 2]}')
    assert end_ids(tmp_path, {"eos_token_id": 7}) == {1, 2}  # the generation config's
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": "2"}')
    with pytest.raises(ValueError, match=r"eos_token_id must be an int or a list"):
        end_ids(tmp_path, {})


def test_a_tied_checkpoint_that_stores_its_head_too_loads(saved, tmp_path):
    """Some tied checkpoints store lm_head.weight as well, equal to the embedding: it
    loads; a head that differs is refused (ours cannot hold two matrices)."""
    import shutil

    from literate.models.checkpoint import load_checkpoint

    folder = tmp_path / "qwen3"
    shutil.copytree(saved["qwen3"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps(config | {"tie_word_embeddings": True})
    )
    state = safetensors.torch.load_file(folder / "model.safetensors")
    state["lm_head.weight"] = state["model.embed_tokens.weight"].clone()
    safetensors.torch.save_file(state, folder / "model.safetensors")
    load_checkpoint(folder, MODEL_TYPES)
    state["lm_head.weight"][0, 0] += 1
    safetensors.torch.save_file(state, folder / "model.safetensors")
    with pytest.raises(ValueError, match="lm_head.weight differs from embed_tokens"):
        load_checkpoint(folder, MODEL_TYPES)


@pytest.mark.parametrize("row", FAMILIES, ids=[f.name for f in FAMILIES])
def test_a_config_of_another_family_is_refused_by_its_model_type(row):
    """Each family's builder reads only its own model_type: a Qwen3 config given to the
    Llama builder would build a Llama without QK-norm, silently."""
    config = getattr(transformers, row.hf_config)(**(configuration(row) | SMALL))
    fields = config.to_dict()
    build = row.function("from_hf_config")
    build(fields, **row.inference_options)  # its own is built
    other = "gpt2" if row.model_type != "gpt2" else "llama"
    with pytest.raises((ValueError, TypeError), match=rf"model_type.*{other}"):
        build(fields | {"model_type": other}, **row.inference_options)
