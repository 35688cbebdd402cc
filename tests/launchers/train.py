"""The worker of the launchers tests, started by each recipe of docs/launching.md as `python train.py
--save-dir DIR`: one rank of a job. Its rank comes from the launcher (RANK, else SLURM_PROCID, else
OMPI_COMM_WORLD_RANK: the variables the library's `%r` reads). It imports torch once and writes into
DIR/rank<R>/:
  dcp/     a real dcp.save with HuggingFaceStorageWriter(enable_consolidation=True): the shards, then
           PyTorch's consolidation ("wb" header, close, "r+b", seek to the end, one write per tensor) into
           model-0000N-of-00002.safetensors and the index JSON (no process group: each rank saves its own)
  wrong.safetensors   8 bytes appended, then a write at offset 0, which the library refuses (the report
           that `appendguard report` groups across ranks); the refusal is caught
and prints "ok: rank R ...". Tensors are tiny and seeded by the rank, so every rank's files differ.
DeepSpeed's launcher adds --local_rank=N, which is accepted and ignored."""
import argparse
import errno
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import HuggingFaceStorageWriter  # noqa: E402

RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK")


def rank():
    for name in RANK_VARIABLES:
        if os.environ.get(name):
            return int(os.environ[name])
    sys.exit(f"train.py: none of {', '.join(RANK_VARIABLES)} is set: not started by a launcher")


def state_dict(seed):
    generator = torch.Generator().manual_seed(1000 + seed)
    return {f"layer{i}.weight": torch.randn((8 + i, 4), generator=generator, dtype=torch.float64).to(dtype)
            for i, dtype in enumerate((torch.float32, torch.bfloat16, torch.float16, torch.float64))}


def save_checkpoint(save_dir, r):
    out = os.path.join(save_dir, f"rank{r}")
    os.makedirs(out, exist_ok=True)
    tensors = state_dict(r)
    mapping = {name: i % 2 + 1 for i, name in enumerate(sorted(tensors))}
    dcp.save(tensors, storage_writer=HuggingFaceStorageWriter(
        os.path.join(out, "dcp"), fqn_to_index_mapping=mapping, save_distributed=True, enable_consolidation=True,
        thread_count_consolidation=2))

    fd = os.open(os.path.join(out, "wrong.safetensors"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"abcdefgh")
        try:
            os.pwrite(fd, b"X", 0)  # below the end of file: refused under the library
            refused = "written"
        except OSError as e:
            refused = f"refused ({errno.errorcode.get(e.errno, e.errno)})"
    finally:
        os.close(fd)
    print(f"ok: rank {r} saved {len(tensors)} tensors under {out}; the write at 0 was {refused}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save-dir", required=True)
    parser.add_argument("--local_rank", type=int, default=None)  # added by DeepSpeed's launcher
    args = parser.parse_args()
    save_checkpoint(args.save_dir, rank())


if __name__ == "__main__":
    main()
