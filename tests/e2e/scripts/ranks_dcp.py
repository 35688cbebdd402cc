"""The DCP consolidation pattern from several processes, like torchrun: RANKS processes started with
Python multiprocessing, each told its rank by the RANK environment variable, each writing its own
FILES_PER_RANK safetensors files (header "wb", reopen "r+b", seek end, tensors; the functions of
tests/integration/scripts/dcp_consolidate.py). After all ranks exit, the parent writes the index JSON.

usage: ranks_dcp.py OUTPUT_DIR [--ranks N] [--files-per-rank N] [--tensors N] [--tensor-bytes N]
                    [--start-method spawn|fork|forkserver] [--bad-rank R]
--bad-rank R: rank R, after writing its files, reopens its first file "r+b", seeks to 8 and rewrites
one byte of the header length (what an in-place "fix the header" step would do).
Exit 0 when every rank succeeded; otherwise 1, with "rank R: <error>" on stderr for each failed rank.
"""
import argparse
import multiprocessing
import os
import queue
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration", "scripts"))
import dcp_consolidate  # noqa: E402


def names_of(rank, files_per_rank, ranks):
    total = ranks * files_per_rank
    return [f"model-{rank * files_per_rank + k + 1:05d}-of-{total:05d}.safetensors" for k in range(files_per_rank)]


def rank_main(output_dir, files_per_rank, ranks, tensors, size, bad_rank, errors):
    rank = int(os.environ["RANK"])
    try:
        for k, name in enumerate(names_of(rank, files_per_rank, ranks)):
            dcp_consolidate.write_file(os.path.join(output_dir, name), rank * files_per_rank + k, tensors, size)
        if rank == bad_rank:
            with open(os.path.join(output_dir, names_of(rank, files_per_rank, ranks)[0]), "r+b") as f:
                f.seek(8)
                f.write(b"{")
    except OSError as error:
        errors.put(f"rank {rank}: {error}")
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--files-per-rank", type=int, default=2)
    parser.add_argument("--tensors", type=int, default=4)
    parser.add_argument("--tensor-bytes", type=int, default=16384)
    parser.add_argument("--start-method", default="spawn")
    parser.add_argument("--bad-rank", type=int, default=-1)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    context = multiprocessing.get_context(args.start_method)
    errors = context.Queue()
    processes = []
    for rank in range(args.ranks):
        os.environ["RANK"] = str(rank)  # a spawned child inherits the environment at start()
        p = context.Process(target=rank_main, args=(args.output_dir, args.files_per_rank, args.ranks, args.tensors,
                                                      args.tensor_bytes, args.bad_rank, errors))
        p.start()
        processes.append(p)
    del os.environ["RANK"]
    for p in processes:
        p.join()
    failed = [p for p in processes if p.exitcode != 0]
    for p in failed:
        try:
            print(errors.get(timeout=5), file=sys.stderr)
        except queue.Empty:
            print(f"a rank exited with status {p.exitcode} without reporting an error", file=sys.stderr)
    if failed:
        return 1
    names = [n for r in range(args.ranks) for n in names_of(r, args.files_per_rank, args.ranks)]
    dcp_consolidate.write_index(args.output_dir, names, args.tensors, args.tensor_bytes)
    print(f"ranks_dcp: {args.ranks} ranks wrote {len(names)} files to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
