"""What PyTorch 2.8 did: write tensor shards at arbitrary offsets of a preallocated file. No append shim
can make that work on an append-only mount; appendguard must refuse it loudly.

usage: random_writer.py PATH
"""
import os
import sys


def main():
    path = sys.argv[1]
    with open(path, "wb") as f:
        f.write(b"\0" * 4096)
    with open(path, "r+b") as f:
        for offset in (3072, 1024, 2048):
            f.seek(offset)
            f.write(b"T" * 512)
    return 0


if __name__ == "__main__":
    sys.exit(main())
