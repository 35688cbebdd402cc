"""The DCP consolidation pattern of tests/integration/scripts/dcp_consolidate.py split in two runs, for
stores where something must happen between the header and the tensors (chattr +a on a kernel
append-only file: after it, no open may truncate).

usage: dcp_phases.py headers|append OUTPUT_DIR [--files N] [--tensors N] [--tensor-bytes N] [--workers N]
  headers: writes every output file's header with open(p, "wb") (the first half of write_file).
  append:  reopens each file with open(p, "r+b"), seek(0, SEEK_END), one write(memoryview) per tensor,
           from a thread pool, then writes the index JSON with "w".
The two runs together write exactly the bytes of one dcp_consolidate.py run with the same arguments.
"""
import argparse
import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration", "scripts"))
import dcp_consolidate  # noqa: E402


def append_tensors(path, file_index, tensors, size):
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        for t in range(tensors):
            f.write(memoryview(dcp_consolidate.tensor_bytes(file_index, t, size)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["headers", "append"])
    parser.add_argument("output_dir")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--tensors", type=int, default=8)
    parser.add_argument("--tensor-bytes", type=int, default=64 * 1024)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    names = [f"model-{i + 1:05d}-of-{args.files:05d}.safetensors" for i in range(args.files)]
    paths = [os.path.join(args.output_dir, name) for name in names]
    try:
        if args.phase == "headers":
            os.makedirs(args.output_dir, exist_ok=True)
            for i, path in enumerate(paths):
                with open(path, "wb") as f:
                    f.write(dcp_consolidate.plan(i, args.tensors, args.tensor_bytes))
            return 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
            futures = [pool.submit(append_tensors, path, i, args.tensors, args.tensor_bytes)
                       for i, path in enumerate(paths)]
            for future in futures:
                future.result()
        dcp_consolidate.write_index(args.output_dir, names, args.tensors, args.tensor_bytes)
    except OSError as error:
        print(f"dcp_phases: {error}", file=sys.stderr)
        return 1
    print(f"dcp_phases: appended to {args.files} files in {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
