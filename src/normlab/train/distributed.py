"""Data-parallel training on PyTorch's own engine: `torchrun --nproc_per_node N -m normlab train ...`.

torchrun starts N processes and sets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous; each
process joins the group (NCCL on CUDA, one GPU per local rank; gloo on CPU) and the trainer
wraps its model in DistributedDataParallel, or shards it with FSDP (`--fsdp`).

How a run stays the run it would be in one process:
- every rank draws the *global* batch (`train.batch_size`) from the same data generator and
  trains on its slice, so the data order, and the checkpoint's generator state, do not depend
  on the world size: a checkpoint resumes on any number of processes;
- each rank's loss is weighted by its share of the batch's target tokens, so the averaged
  gradient is the global batch's mean-loss gradient even when the ranks' shares differ (masked
  LM); the logged loss is the global mean;
- only rank 0 writes the run directory (lock, config, metrics, checkpoints, diagnostics); every
  rank evaluates the same fixed val batches (under FSDP the forward needs all of them), and the
  other ranks read rank 0's checkpoint to resume (a rank that sees another step stops the run).
What differs: the order of floating-point sums (the gradients are reduced across ranks), and
dropout masks, which each rank draws for its own slice.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from normlab.config import RunConfig
from normlab.nn.model import IGNORE

PARALLEL = ("ddp", "fsdp")


@dataclass
class Dist:
    """This process's place in the group; the default is a single process (no group)."""

    rank: int = 0
    world: int = 1
    device: torch.device | None = None  # the device torchrun's local rank owns (CUDA), else None
    backend: str | None = None
    parallel: str = "ddp"

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def shard(self, batch: torch.Tensor) -> torch.Tensor:
        """This rank's slice of a global batch (dimension 0)."""
        if not self.active:
            return batch
        size = batch.shape[0] // self.world
        return batch[self.rank * size:(self.rank + 1) * size]

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """The sum of `value` over the ranks (a new tensor; the input is left as it is)."""
        out = value.detach().clone()
        if self.active:
            torch.distributed.all_reduce(out)
        return out

    def from_main(self, value: Any) -> Any:
        """Rank 0's `value`, on every rank (any picklable object)."""
        if not self.active:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def record(self) -> dict[str, Any]:
        return {"world_size": self.world, "backend": self.backend, "parallel": self.parallel if self.active else None}


SINGLE = Dist()


def from_env(device: str, parallel: str = "ddp") -> Dist:
    """Join the process group torchrun set up (WORLD_SIZE > 1); a single process otherwise."""
    if parallel not in PARALLEL:
        raise ValueError(f"unknown data-parallel engine {parallel!r}; valid: {', '.join(PARALLEL)}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE
    from normlab.device import resolve_device

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device)
    if dev.type == "cuda":
        if local >= torch.cuda.device_count():
            raise ValueError(f"local rank {local} has no GPU: torch sees {torch.cuda.device_count()}; "
                             "run torchrun with --nproc_per_node at most the GPU count")
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend)
    return Dist(rank, world, dev, backend, parallel)


def check_settings(cfg: RunConfig, dist: Dist, fresh: bool) -> None:
    """Refuse, before anything is touched, what a group of processes cannot train."""
    if dist.active and cfg.train.batch_size % dist.world:
        raise ValueError(f"train.batch_size = {cfg.train.batch_size} does not split over {dist.world} processes; "
                         f"valid: a multiple of {dist.world} (it is the global batch)")
    if sharded(dist) and cfg.diagnostics.number("interval") is not None:
        raise ValueError(f"diagnostics.interval = {cfg.diagnostics.interval} under --parallel fsdp: the probe "
                         "reads whole weights and FSDP holds shards; valid: diagnostics.interval = 'off', "
                         "or --parallel ddp")
    if dist.active and fresh:
        raise ValueError("--fresh is refused under torchrun (one process would clear what the others read); "
                         "run it once without torchrun, or choose another --out")


def global_loss(loss: torch.Tensor, y: torch.Tensor, dist: Dist) -> tuple[torch.Tensor, float]:
    """(the loss to differentiate, the global batch's mean loss). Alone: the loss itself. Under torchrun:
    weighted by this rank's share of the target tokens, so the gradients DDP averages are the global
    mean's; every rank gets the same logged value, so all agree on divergence."""
    if not dist.active:
        return loss, loss.item()
    count = (y != IGNORE).sum().to(loss.dtype)
    summed, total = dist.sum(torch.stack([loss.detach() * count, count]))  # one all-reduce a step
    return loss * (count * dist.world / total), (summed / total).item()


def wrap(model: torch.nn.Module, dist: Dist) -> torch.nn.Module:
    """The module the training step calls: the model itself, its DDP wrapper, or the model sharded by FSDP
    (FSDP2's `fully_shard`, each block a unit, in place)."""
    if not dist.active:
        return model
    if dist.parallel == "fsdp":
        if getattr(getattr(model, "scheme", None), "on_sphere", False):
            raise ValueError(f"scheme {model.cfg.scheme!r} puts its weights back on the unit sphere after every step, "
                             "along dimensions FSDP shards; valid here: --parallel ddp")
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            raise ValueError(f"--parallel fsdp needs FSDP2 (torch >= 2.6); this torch is {torch.__version__}; "
                             "valid here: --parallel ddp") from None

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [dist.device] if dist.device is not None and dist.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


def sharded(dist: Dist) -> bool:
    return dist.active and dist.parallel == "fsdp"


def full_state(state: dict[str, Any], dist: Dist) -> dict[str, Any]:
    """A state dict (model's or optimizer's) with FSDP's sharded tensors gathered whole, on CPU, in the format one
    process writes, so that a checkpoint resumes on any world size and engine. A collective under FSDP: every
    rank calls it, in the same order."""
    if not sharded(dist):
        return state
    from torch.distributed.tensor import DTensor

    def whole(value: Any) -> Any:
        if isinstance(value, DTensor):
            return value.full_tensor().cpu()
        if isinstance(value, dict):
            return {k: whole(v) for k, v in value.items()}
        if isinstance(value, list):
            return [whole(v) for v in value]
        return value

    return whole(state)


def shard_optimizer_state(optimizer: torch.optim.Optimizer, dist: Dist) -> None:
    """After `load_state_dict` of a whole (one-process) optimizer state: each moment tensor cut to its
    parameter's FSDP shard (locally: every rank holds the whole state)."""
    if not sharded(dist):
        return
    from torch.distributed.tensor import DTensor, distribute_tensor

    for param, state in optimizer.state.items():
        if not isinstance(param, DTensor):
            continue
        for key, value in state.items():
            if torch.is_tensor(value) and not isinstance(value, DTensor) and value.shape == param.shape:
                state[key] = distribute_tensor(value.to(param.device), param.device_mesh, param.placements,
                                               src_data_rank=None)


def close(dist: Dist, wait: bool = False) -> None:
    """Leave the process group. `wait`: first meet the other ranks (a normal end: all ranks get here), so no
    rank tears its connections down while another still uses them (gloo then aborts the faster rank with
    "terminate called without an active exception"). Not on an error path, where a rank may never arrive."""
    if dist.active and torch.distributed.is_initialized():
        if wait:
            torch.distributed.barrier()
        torch.distributed.destroy_process_group()
