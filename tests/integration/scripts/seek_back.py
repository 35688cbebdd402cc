"""A writer whose culprit is a seek: the header written first as a placeholder, the data after it, then a
seek back to the start to patch the header. The patch reaches the library only when `with` closes the
file and flushes it, so the write site is the `with` line and the seek site is patch_header's seek.

usage: seek_back.py PATH"""
import sys


def patch_header(f):
    f.seek(0)  # the culprit: the position leaves the end
    f.write(b"H" * 8)


def main(path):
    with open(path, "wb") as f:  # the write site: the close flushes the patch
        f.write(b"\0" * 8)
        f.write(b"D" * 100)
        patch_header(f)


if __name__ == "__main__":
    main(sys.argv[1])
