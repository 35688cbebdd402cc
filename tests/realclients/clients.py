"""The real clients, run by the interpreter that has torch, safetensors and transformers (one process per
call, under the library or not as the test decides). Every action writes into OUT_DIR, checks what it
wrote by loading it back with the client's own reader, and prints one line "ok: ..." on success; any
failure propagates as an exception (exit 1, traceback on stderr), which the tests assert on.

usage: clients.py ACTION OUT_DIR [SHARD_DIR]
actions:
  dcp_save          dcp.save with HuggingFaceStorageWriter(enable_consolidation=True) into OUT_DIR
  make_shards       dcp.save with save_distributed=True and no consolidation: the shards in OUT_DIR/sharded
  consolidate       consolidate_safetensors_files(SHARD_DIR, OUT_DIR, mapping, num_threads=4)
  consolidate4      the same into 4 output files (4 threads, one file each)
  dcp_two_ranks     two gloo ranks on loopback: shards into OUT_DIR/shards, then
                    consolidate_safetensors_files_on_every_rank into OUT_DIR/hf
  torch_save        torch.save of the state dict to OUT_DIR/model.pt
  save_file         safetensors.torch.save_file to OUT_DIR/model.safetensors
  save_pretrained   transformers save_pretrained of a tiny GPT-2 built from a config (no download), in
                    shards of 40 KB
  hub_save          huggingface_hub save_torch_state_dict of the state dict, in shards of 40 KB
  accelerate_save   accelerate Accelerator(cpu=True).save_state of a small model
  dcp_default       dcp.save with the default FileSystemWriter (checkpoint_id=OUT_DIR), then dcp.load
  ACTION_twice      save_file, save_pretrained, hub_save, accelerate_save, dcp_default twice into OUT_DIR
  several           clients.py several OUT_DIR A,B,...: each action into OUT_DIR/A, OUT_DIR/B (one process)
  try_each          the same, going on after a failure, which it prints as "failed: ACTION: ERROR"
  save_big          clients.py save_big OUT_DIR [MIB]: save_file of MIB (48) MiB, "saving" printed before
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

# Float tensors only: PyTorch's consolidation itself crashes on integer and bool tensors.
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
FILES = 3


def state_dict():
    generator = torch.Generator().manual_seed(1234)
    tensors = {}
    for i, dtype in enumerate(DTYPES * 2):
        shape = (64 + 16 * i, 32) if i % 2 == 0 else (1024 + 8 * i,)
        tensors[f"layer{i}.weight"] = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    return tensors


def mapping(tensors, files=FILES):
    """Spreads the tensors over `files` output files (indices 1..files)."""
    return {name: i % files + 1 for i, name in enumerate(sorted(tensors))}


def check_equal(loaded, expected, what):
    if sorted(loaded) != sorted(expected):
        raise AssertionError(f"{what}: tensor names {sorted(loaded)} != {sorted(expected)}")
    for name, tensor in expected.items():
        if loaded[name].dtype != tensor.dtype or not torch.equal(loaded[name], tensor):
            raise AssertionError(f"{what}: {name} differs ({loaded[name].dtype} vs {tensor.dtype})")


def check_consolidated(out_dir, expected, files=FILES):
    from safetensors.torch import load_file
    names = sorted(n for n in os.listdir(out_dir) if n.endswith(".safetensors"))
    if len(names) != files:
        raise AssertionError(f"expected {files} consolidated files in {out_dir}, found {names}")
    loaded = {}
    for name in names:
        loaded.update(load_file(os.path.join(out_dir, name)))
    check_equal(loaded, expected, out_dir)
    return names


def hf_writer(path, tensors, consolidate):
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    return HuggingFaceStorageWriter(path, fqn_to_index_mapping=mapping(tensors), save_distributed=True,
                                    enable_consolidation=consolidate, thread_count_consolidation=4)


def dcp_save(out_dir):
    import torch.distributed.checkpoint as dcp
    tensors = state_dict()
    # No process group: dcp.save falls back to a local save, and finish() consolidates into out_dir.
    dcp.save(tensors, storage_writer=hf_writer(out_dir, tensors, consolidate=True))
    names = check_consolidated(out_dir, tensors)
    print(f"ok: dcp.save consolidated {len(tensors)} tensors into {len(names)} files")


def make_shards(out_dir):
    import torch.distributed.checkpoint as dcp
    tensors = state_dict()
    dcp.save(tensors, storage_writer=hf_writer(out_dir, tensors, consolidate=False))
    print(f"ok: dcp.save wrote the shards of {len(tensors)} tensors")


def consolidate(out_dir, shard_dir):
    from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files
    tensors = state_dict()
    consolidate_safetensors_files(shard_dir, out_dir, mapping(tensors), num_threads=4)
    names = check_consolidated(out_dir, tensors)
    print(f"ok: consolidate_safetensors_files wrote {len(names)} files")


def consolidate4(out_dir, shard_dir):
    from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files
    tensors = state_dict()
    consolidate_safetensors_files(shard_dir, out_dir, mapping(tensors, 4), num_threads=4)
    names = check_consolidated(out_dir, tensors, 4)
    print(f"ok: consolidate_safetensors_files wrote {len(names)} files with 4 threads")


def _rank_main(rank, out_dir, port):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint._consolidate_hf_safetensors import (
        consolidate_safetensors_files_on_every_rank)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        tensors = state_dict()
        # Each rank saves half of the tensors, as its own shard files (shard-0000R-...).
        mine = {name: t for i, (name, t) in enumerate(sorted(tensors.items())) if i % 2 == rank}
        # With a process group the shards go straight into the writer's path (no "sharded" folder).
        dcp.save(mine, storage_writer=hf_writer(os.path.join(out_dir, "shards"), tensors, consolidate=False))
        dist.barrier()
        consolidate_safetensors_files_on_every_rank(os.path.join(out_dir, "shards"), os.path.join(out_dir, "hf"),
                                                    mapping(tensors), num_threads=2)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def dcp_two_ranks(out_dir):
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.makedirs(os.path.join(out_dir, "hf"), exist_ok=True)  # the consolidation does not create it
    mp.start_processes(_rank_main, args=(out_dir, port), nprocs=2, join=True, start_method="spawn")
    names = check_consolidated(os.path.join(out_dir, "hf"), state_dict())
    print(f"ok: two ranks consolidated {len(names)} files")


def torch_save(out_dir):
    tensors = state_dict()
    path = os.path.join(out_dir, "model.pt")
    torch.save(tensors, path)
    check_equal(torch.load(path, weights_only=True), tensors, path)
    print("ok: torch.save wrote model.pt")


def save_file(out_dir):
    from safetensors.torch import load_file, save_file as st_save_file
    tensors = state_dict()
    path = os.path.join(out_dir, "model.safetensors")
    st_save_file(tensors, path)
    check_equal(load_file(path), tensors, path)
    print("ok: save_file wrote model.safetensors")


def save_pretrained(out_dir):
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, vocab_size=128)
    model = GPT2LMHeadModel(config)
    # Small shards: several model-0000N-of-0000M.safetensors files, each through its own temporary file.
    model.save_pretrained(out_dir, max_shard_size="40KB")
    shards = sorted(n for n in os.listdir(out_dir) if n.endswith(".safetensors"))
    if len(shards) < 2:
        raise AssertionError(f"expected at least two shards, found {shards}")
    loaded = {}
    for name in shards:
        loaded.update(load_file(os.path.join(out_dir, name)))
    expected = {k: v for k, v in model.state_dict().items() if k in loaded}
    check_equal(loaded, expected, out_dir)
    print(f"ok: save_pretrained wrote {sorted(os.listdir(out_dir))}")


def hub_save(out_dir):
    from huggingface_hub import save_torch_state_dict
    from safetensors.torch import load_file
    tensors = state_dict()
    # Two files: every safetensors file through its own temporary file and rename.
    save_torch_state_dict(tensors, out_dir, max_shard_size="40KB")
    shards = sorted(n for n in os.listdir(out_dir) if n.endswith(".safetensors"))
    if len(shards) < 2:
        raise AssertionError(f"expected at least two shards, found {shards}")
    loaded = {}
    for name in shards:
        loaded.update(load_file(os.path.join(out_dir, name)))
    check_equal(loaded, tensors, out_dir)
    print(f"ok: save_torch_state_dict wrote {sorted(os.listdir(out_dir))}")


def accelerate_save(out_dir):
    import random
    import numpy
    from accelerate import Accelerator
    from safetensors.torch import load_file
    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(model)
    accelerator.save_state(out_dir)
    loaded = load_file(os.path.join(out_dir, "model.safetensors"))
    check_equal(loaded, {k: v.detach() for k, v in model.state_dict().items()}, out_dir)
    print(f"ok: accelerate save_state wrote {sorted(os.listdir(out_dir))}")


def dcp_default(out_dir):
    import torch.distributed.checkpoint as dcp
    tensors = state_dict()
    # The default FileSystemWriter: .metadata.tmp written and closed, then renamed onto .metadata.
    dcp.save(tensors, checkpoint_id=out_dir)
    loaded = {name: torch.empty_like(t) for name, t in tensors.items()}
    dcp.load(loaded, checkpoint_id=out_dir)
    check_equal(loaded, tensors, out_dir)
    print(f"ok: dcp.save and dcp.load with the default writer: {sorted(os.listdir(out_dir))}")


def save_twice(action):
    """`action` run twice into the same OUT_DIR (the second save onto the names of the first)."""
    def run(out_dir, *rest):
        ACTIONS[action](out_dir, *rest)
        ACTIONS[action](out_dir, *rest)
    run.__name__ = action + "_twice"
    return run


def big_tensors(mib):
    generator = torch.Generator().manual_seed(99)
    return {"big.weight": torch.randn(mib << 18, generator=generator)}  # float32: 4 bytes each


def save_big(out_dir, mib="48"):
    """save_file of MIB MiB into OUT_DIR/model.safetensors; prints "saving" (flushed) just before."""
    from safetensors.torch import save_file as st_save_file
    tensors = big_tensors(int(mib))
    print("saving", flush=True)
    st_save_file(tensors, os.path.join(out_dir, "model.safetensors"))
    print("ok: saved", flush=True)


def try_each(out_dir, names):
    """Each of the comma-separated actions into OUT_DIR/ACTION; prints "failed: ACTION: ERROR" or "ok: ..."."""
    for name in names.split(","):
        try:
            ACTIONS[name](os.path.join(out_dir, name))
        except BaseException as e:  # noqa: BLE001 (dcp raises CheckpointException, a BaseException)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            # dcp's CheckpointException keeps each rank's exception (and its traceback) in `failures`.
            inner = [str(v[0] if isinstance(v, tuple) else v) for v in getattr(e, "failures", {}).values()]
            text = " | ".join([f"{type(e).__name__}: {e}", *inner]).replace("\n", " ")
            print(f"failed: {name}: {text}", flush=True)


def several(out_dir, names):
    """Each of the comma-separated actions into OUT_DIR/ACTION, in this one process (torch imported once)."""
    for name in names.split(","):
        ACTIONS[name](os.path.join(out_dir, name))


ACTIONS = {f.__name__: f for f in (dcp_save, make_shards, consolidate, consolidate4, dcp_two_ranks, torch_save,
                                   save_file, save_pretrained, hub_save, accelerate_save, dcp_default,
                                   save_big, try_each, several)}
ACTIONS.update({f.__name__: f for f in (save_twice(a) for a in ("save_file", "save_pretrained", "hub_save",
                                                                 "accelerate_save", "dcp_default"))})

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ACTIONS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    os.makedirs(sys.argv[2], exist_ok=True)
    if sys.argv[1] in ("several", "try_each"):
        for name in sys.argv[3].split(","):
            os.makedirs(os.path.join(sys.argv[2], name), exist_ok=True)
    ACTIONS[sys.argv[1]](*sys.argv[2:])
