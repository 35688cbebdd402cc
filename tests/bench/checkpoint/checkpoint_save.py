"""One checkpoint-scale save, timed inside the process (the import of torch excluded): run by
checkpoint_bench.py (scripts/bench checkpoint) without and with the library.

usage: checkpoint_save.py dcp|save_file DIR SIZE
  dcp        torch.distributed.checkpoint.save of SIZE bytes (8 float32 tensors) through PyTorch's
             HuggingFaceStorageWriter with consolidation (enable_consolidation=True, 2 threads): the
             shards, then the consolidated model-0000N-of-00002.safetensors ("wb" header, close, "r+b",
             seek to the end, one write per tensor) into DIR, the shards under DIR/sharded (no process
             group: a local save)
  save_file  safetensors.torch.save_file of one float32 tensor of SIZE bytes to DIR/model.safetensors
Prints save_s=SECONDS and bytes=BYTES (the size of the safetensors files written, checked against SIZE)."""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

TENSORS = 8
OUTPUT_FILES = 2


def save_dcp(out, size):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    per_tensor = size // TENSORS // 4
    tensors = {f"layer{i}.weight": torch.full((per_tensor,), float(i), dtype=torch.float32) for i in range(TENSORS)}
    mapping = {name: i % OUTPUT_FILES + 1 for i, name in enumerate(sorted(tensors))}
    start = time.perf_counter()
    dcp.save(tensors, storage_writer=HuggingFaceStorageWriter(
        out, fqn_to_index_mapping=mapping, save_distributed=True, enable_consolidation=True,
        thread_count_consolidation=2))
    elapsed = time.perf_counter() - start
    # The shards are under DIR/sharded; the consolidated files beside them, in DIR.
    written = sum(os.path.getsize(os.path.join(out, name)) for name in os.listdir(out)
                  if name.endswith(".safetensors"))
    return elapsed, written


def save_safetensors(out, size):
    from safetensors.torch import save_file
    tensor = torch.full((size // 4,), 1.5, dtype=torch.float32)
    path = os.path.join(out, "model.safetensors")
    start = time.perf_counter()
    save_file({"w": tensor}, path)
    return time.perf_counter() - start, os.path.getsize(path)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("dcp", "save_file"):
        sys.exit(__doc__)
    workload, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    elapsed, written = (save_dcp if workload == "dcp" else save_safetensors)(out, size)
    if written < size:
        sys.exit(f"checkpoint_save: {workload} wrote {written} bytes of safetensors, expected at least {size}")
    print(f"save_s={elapsed:.4f}\nbytes={written}")


if __name__ == "__main__":
    main()
