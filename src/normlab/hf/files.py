"""Read a local Hugging Face model directory safely: its config.json and its weights, and nothing else.

Every problem is an `HFDirError` whose text is one line naming the file and what is wrong with it, so a
command can print it as is (no traceback). Weights come from safetensors, or from a `.bin` through torch's
weights-only unpickler, which refuses any pickle that would build an object or call a function: a
directory a user points at may hold a planted pickle, and loading it must never run its code.

    model.safetensors | model.safetensors.index.json (shards)      preferred, in this order
    pytorch_model.bin | pytorch_model.bin.index.json (shards)      torch.load(weights_only=True)

Imports only torch and the standard library at its top, and safetensors where it reads a file: the `hf` extra
(transformers, safetensors) stays optional, and `normlab --help`, which lists the families, works without it.
"""
from __future__ import annotations

import json
import pickle
import re
import struct
import zipfile
from pathlib import Path

import torch

CONFIG = "config.json"
# (single file, sharded index), most trusted first
WEIGHTS = (("model.safetensors", "model.safetensors.index.json"), ("pytorch_model.bin", "pytorch_model.bin.index.json"))
HEADER_MAX = 100 * 2**20  # safetensors' own bound on the JSON header (100 MB)
PICKLE_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive; a bare pickle (protocol 2+)


class HFDirError(ValueError):
    """A Hugging Face directory that cannot be read; str() is one line naming the file and the problem."""

    def __init__(self, file: Path | str, problem: str):
        self.file, self.problem = Path(file), problem
        super().__init__(f"{file}: {problem}")


def read_config(path: str | Path) -> dict:
    """config.json of the model directory `path`, parsed: a JSON object with a `model_type`."""
    directory = _directory(path)
    file = directory / CONFIG
    if not file.is_file():
        raise HFDirError(directory, f"no {CONFIG}: not a Hugging Face model directory")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise HFDirError(file, "not UTF-8 text, so not a JSON config") from None
    except json.JSONDecodeError as e:
        raise HFDirError(file, f"not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(config, dict):
        raise HFDirError(file, f"holds a JSON {type(config).__name__}, not an object of settings")
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise HFDirError(file, "names no model_type, so the model's family is unknown")
    return config


def weight_files(path: str | Path) -> list[Path]:
    """The files that hold the weights: one file, or the shards an index lists (each checked to exist)."""
    directory = _directory(path)
    for single, index in WEIGHTS:
        if (directory / index).is_file():
            return _shards(directory / index)
        if (directory / single).is_file():
            return [directory / single]
    names = ", ".join(name for pair in WEIGHTS for name in pair)
    raise HFDirError(directory, f"no weights: none of {names}")


def check_weights(path: str | Path) -> list[Path]:
    """Each weight file's integrity, without reading its tensors into memory: safetensors' header and length,
    a `.bin` through the weights-only unpickler (memory-mapped). Returns the files."""
    files = weight_files(path)
    for file in files:
        if file.suffix == ".safetensors":
            _safetensors_header(file)
        else:
            _load_bin(file, mmap=zipfile.is_zipfile(file))
    return files


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in the directory `path`, by name, on the CPU. Safetensors' tensors are
    memory-mapped from their file: copy them (load_state_dict does) before that file is overwritten."""
    tensors: dict[str, torch.Tensor] = {}
    for file in weight_files(path):
        if file.suffix == ".safetensors":
            _safetensors_header(file)  # a clear message for a truncated or foreign file before safetensors reads it
            from safetensors import SafetensorError  # the hf extra's; needed only to read a safetensors file
            from safetensors.torch import load_file

            try:
                part = load_file(file, device="cpu")
            except (SafetensorError, OSError) as e:
                raise HFDirError(file, f"not a readable safetensors file ({_first_line(e)})") from None
        else:
            part = _load_bin(file)
        repeated = sorted(set(part) & set(tensors))
        if repeated:
            raise HFDirError(file, f"repeats tensor {repeated[0]!r} already read from another shard")
        tensors.update(part)
    return tensors


def _directory(path: str | Path) -> Path:
    directory = Path(path)
    if not directory.is_dir():
        raise HFDirError(directory, "not a directory" if directory.exists() else "does not exist")
    return directory


def _shards(index: Path) -> list[Path]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise HFDirError(index, "not a shard index (a JSON object with a weight_map of tensor → file)") from None
    if not names or not all(isinstance(n, str) for n in names):
        raise HFDirError(index, "its weight_map names no shard files")
    shards = [index.parent / n for n in names]
    for shard in shards:
        if shard.resolve().parent != index.parent.resolve():  # a shard is a file beside its index, nowhere else
            raise HFDirError(index, f"names a shard outside its directory: {shard.name!r}")
        if not shard.is_file():
            raise HFDirError(index, f"lists {shard.name}, which is missing")
    return shards


def _safetensors_header(file: Path) -> dict:
    """The safetensors header, checked: 8-byte length, JSON header, every tensor's bytes inside the file."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise HFDirError(file, f"truncated: {size} bytes, too short for a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > min(HEADER_MAX, size - 8) and head.startswith(PICKLE_MAGIC):  # (a real header may start 0x80)
            raise HFDirError(file, "is a pickle (torch.save), not safetensors; pickles are read only from .bin "
                                   "files, with the weights-only unpickler")
        if length > min(HEADER_MAX, size - 8):
            raise HFDirError(file, f"truncated or not safetensors: its header claims {length} bytes, "
                                   f"the file has {size}")
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise HFDirError(file, "not safetensors: its header is not JSON") from None
    data = size - 8 - length
    for name, entry in header.items() if isinstance(header, dict) else ():
        if name == "__metadata__":
            continue
        end = (entry.get("data_offsets") or [0, 0])[-1] if isinstance(entry, dict) else 0
        if end > data:
            raise HFDirError(file, f"truncated: tensor {name!r} ends at byte {end} of the data, "
                                   f"the file holds {data}")
    return header


def _load_bin(file: Path, mmap: bool = False) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(file, weights_only=True, map_location="cpu", mmap=mmap)
    except pickle.UnpicklingError as e:  # the weights-only unpickler met a global it will not call
        raise HFDirError(file, f"refused: not a plain pickle of tensors, {_refused_global(e)} "
                               "(nothing of it was run)") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as e:
        raise HFDirError(file, f"not a readable torch checkpoint ({_first_line(e)})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise HFDirError(file, "does not hold a dict of tensors")
    return state


def _refused_global(e: Exception) -> str:
    found = re.search(r"GLOBAL ([\w.]+)", str(e))
    return f"it asks to call {found.group(1)}" if found else _first_line(e)


def _first_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0].rstrip(".") if lines else type(e).__name__
