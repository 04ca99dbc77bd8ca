"""Where a run computes, and what that machine is: the bottom floor, so that every layer that takes a device
(training, diagnostics, benchmarks, the study) resolves it the same way without importing the trainer."""
from __future__ import annotations

import platform

import torch


def resolve_device(name: str) -> torch.device:
    """`auto` picks CUDA when present, else CPU; anything else is taken as given and checked."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; valid: auto, cpu, cuda, cuda:N, mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but torch sees no CUDA device; use device = 'auto' or 'cpu'")
    return device


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
