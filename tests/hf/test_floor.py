"""normlab's exports load under the oldest transformers the `hf` extra allows as under the newest: the Makefile
builds that version in an environment of its own (`make hf-floor`, part of `make test`), with no torch, and the
tokenizers are loaded there. Old: an export written under transformers 5 named `TokenizersBackend` as its class,
which 4.x cannot load, though the extra allowed it."""
import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import transformers

from normlab.hf.run import export_run
from normlab.train import train
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]
FLOOR_PYTHON = ROOT / ".venv-hf-floor" / "bin" / "python"
TEXTS = ["To be, or not", "Be", "héllo ☃"]
READ = """import json, sys
from transformers import AutoTokenizer
out = {}
for d in sys.argv[2:]:
    tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
    texts = json.loads(sys.argv[1])
    enc = tok(texts, padding=True)
    out[d] = {"ids": enc["input_ids"], "mask": enc["attention_mask"], "inputs": sorted(enc.keys()),
              "decoded": [tok.decode(tok(t)["input_ids"], skip_special_tokens=True) for t in texts],
              "pad": tok.pad_token, "max": tok.model_max_length}
print(json.dumps(out))
"""


def read_all(python: str, dirs: list[Path]) -> dict:
    done = subprocess.run([python, "-c", READ, json.dumps(TEXTS), *map(str, dirs)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-1000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_floor_environment_is_the_extras_floor():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]["hf"]
    floor = next(re.fullmatch(r"transformers>=([\d.]+)", dep).group(1) for dep in extra if dep.startswith("transformers"))
    assert re.search(rf"^HF_FLOOR := {re.escape(floor)}$", (ROOT / "Makefile").read_text("utf-8"), re.M)


@pytest.mark.skipif(not FLOOR_PYTHON.exists(), reason="make hf-floor (part of make test) builds the floor environment")
def test_exported_tokenizers_read_alike_under_the_floor_and_the_newest(tmp_path):
    import sys

    dirs = []
    for tokenizer in ("char", "byte"):
        run = tmp_path / f"run-{tokenizer}"
        train(tiny_config(data={"tokenizer": tokenizer}, train={"steps": 2}), run)
        dirs.append(export_run(run, tmp_path / f"hf-{tokenizer}"))
    floor_version = subprocess.run([str(FLOOR_PYTHON), "-c", "import transformers; print(transformers.__version__)"],
                                   capture_output=True, text=True).stdout.split()[-1]
    assert floor_version != transformers.__version__
    newest, oldest = read_all(sys.executable, dirs), read_all(str(FLOOR_PYTHON), dirs)
    assert oldest == newest
    assert newest[str(dirs[1])]["decoded"] == TEXTS  # the byte tokenizer reads any text back
