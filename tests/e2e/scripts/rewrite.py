"""Seeks back and rewrites part of a file, like PyTorch 2.8's sharded writes.

usage: rewrite.py reopen|new PATH
  reopen: open(PATH, "wb") writes 4096 bytes of b"a"; open(PATH, "r+b"), seek(1024), write 512 bytes of
          b"T", flush.
  new:    open(PATH, "w+b") writes 4096 bytes of b"a", flush, seek(1024), write 512 bytes of b"T", flush.
Exits 0 if everything succeeded, 1 with "rewrite: [Errno N] ..." on stderr at the first OSError.
"""
import sys


def main():
    mode, path = sys.argv[1], sys.argv[2]
    try:
        if mode == "reopen":
            with open(path, "wb") as f:
                f.write(b"a" * 4096)
            f = open(path, "r+b")
        else:
            f = open(path, "w+b")
            f.write(b"a" * 4096)
            f.flush()
        try:
            f.seek(1024)
            f.write(b"T" * 512)
            f.flush()
        finally:
            try:
                f.close()
            except OSError:
                pass  # the same refused bytes, retried by close: the first error is the one to report
    except OSError as error:
        print(f"rewrite: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
