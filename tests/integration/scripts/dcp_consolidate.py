"""What PyTorch 2.9+ distributed-checkpoint consolidation does to its output safetensors files.

Mirrors torch/distributed/checkpoint/_consolidate_hf_safetensors.py: per output file, the header is
written with open(p, "wb"); the file is then reopened with open(p, "r+b"), seek(0, SEEK_END), and every
tensor is written with one write(memoryview) in offset order. Output files are written by a thread
pool, one thread per file, and an index JSON is written with "w". The tensor bytes are deterministic,
so two runs (with and without appendguard, on a mount or a local disk) can be compared byte for byte.

usage: dcp_consolidate.py OUTPUT_DIR [--files N] [--tensors N] [--tensor-bytes N] [--workers N]
"""
import argparse
import concurrent.futures
import json
import os
import struct
import sys


def tensor_bytes(file_index, tensor_index, size):
    seed = (file_index * 131 + tensor_index * 7) % 251
    block = bytes((seed + i) % 256 for i in range(256))
    return (block * (size // 256 + 1))[:size]


def plan(file_index, tensors, size):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in range(tensors):
        header[f"layer{file_index}.weight{t}"] = {
            "dtype": "F32", "shape": [size // 4], "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded


def write_file(path, file_index, tensors, size):
    with open(path, "wb") as f:
        f.write(plan(file_index, tensors, size))
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        for t in range(tensors):
            f.write(memoryview(tensor_bytes(file_index, t, size)))
    return os.path.basename(path)


def write_index(output_dir, names, tensors, size):
    """The index JSON, written with "w" as DCP does: tensor t of file i is layer{i}.weight{t}."""
    index = {"metadata": {"total_size": len(names) * tensors * size},
             "weight_map": {f"layer{i}.weight{t}": names[i] for i in range(len(names)) for t in range(tensors)}}
    with open(os.path.join(output_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--tensors", type=int, default=8)
    parser.add_argument("--tensor-bytes", type=int, default=64 * 1024)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    names = [f"model-{i + 1:05d}-of-{args.files:05d}.safetensors" for i in range(args.files)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(write_file, os.path.join(args.output_dir, name), i, args.tensors,
                               args.tensor_bytes) for i, name in enumerate(names)]
        try:
            for future in futures:
                future.result()
        except OSError as error:
            print(f"dcp_consolidate: {error}", file=sys.stderr)
            return 1
    write_index(args.output_dir, names, args.tensors, args.tensor_bytes)
    print(f"dcp_consolidate: wrote {args.files} files to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
