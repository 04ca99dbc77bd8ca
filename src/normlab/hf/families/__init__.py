"""The Hugging Face families normlab reads and writes, one adapter each (`normlab.hf.adapter`). Importing
this package registers them all: every module here is imported and registers its adapters (`@adapter`), so a
new family is a new module here and nothing else."""
import importlib
import pkgutil

from normlab.hf.adapter import ADAPTERS, Adapter, by_model_type, export_layouts, exportable_text, importable_text

# the order the first families came to normlab, which help, refusals and export follow; any other after them
_FIRST = ("gpt2", "llama", "gpt_neox", "gemma2", "bert")
for _module in sorted((m.name for m in pkgutil.iter_modules(__path__)),
                      key=lambda name: (_FIRST.index(name) if name in _FIRST else len(_FIRST), name)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["ADAPTERS", "Adapter", "by_model_type", "export_layouts", "exportable_text", "importable_text"]
