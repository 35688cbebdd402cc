"""Performs each file operation that append-only stores restrict, in a directory of a mount, and prints
one line per operation: NAME=RESULT, RESULT being "0" when every call succeeded, else the failing calls
with their errno names, e.g. "write ESPIPE, close EPERM". docs/stores.md holds the table of these results
per store; tests/e2e/test_stores.py checks that it matches what this prints.

usage: store_probe.py DIR

  open_rdwr_existing    open(O_RDWR) of an existing 4-byte file, write 4 bytes at its end, close
  open_wronly_existing  open(O_WRONLY) (no O_TRUNC, no O_APPEND) of an existing file, write at 4, close
  open_append_existing  open(O_WRONLY|O_APPEND) of an existing file, write, close
  write_not_at_end      new file: write 8 bytes, pwrite 2 bytes at offset 2, close
  truncate              truncate(2) an existing 4-byte file to 2 bytes
  fallocate             fallocate(fd, 0, 0, 4096) on an O_WRONLY|O_APPEND descriptor of an existing file
  rename                rename(2) an existing file to a new name
  rename_onto_existing  rename(2) an existing file onto another existing file

No O_CREAT on the opens of existing files. Each operation gets fresh files. What the backing store holds
afterwards is the caller's to check.
"""
import ctypes
import errno
import os
import sys

OPERATIONS = ["open_rdwr_existing", "open_wronly_existing", "open_append_existing", "write_not_at_end",
              "truncate", "fallocate", "rename", "rename_onto_existing"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def errno_name(code):
    if code == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"  # Python names 95 ENOTSUP, the same number on Linux
    return errno.errorcode.get(code, str(code))


class Steps:
    """Collects "call ERRNO" for each failing call of one operation."""

    def __init__(self):
        self.failed = []

    def call(self, label, function, *args):
        try:
            return function(*args)
        except OSError as error:
            self.failed.append(f"{label} {errno_name(error.errno)}")
            return None

    def result(self):
        return ", ".join(self.failed) if self.failed else "0"


def make(path, data=b"head"):
    with open(path, "wb") as f:
        f.write(data)


def fallocate(fd, offset, length):
    if _libc.fallocate(fd, 0, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def open_write_close(steps, path, flags, offset=None, create_data=None):
    fd = steps.call("open", os.open, path, flags, 0o644)
    if fd is None:
        return
    if create_data is not None:
        steps.call("write", os.write, fd, create_data)
    if offset is None:
        steps.call("write", os.write, fd, b"tail")
    else:
        steps.call("pwrite" if create_data is not None else "write", os.pwrite, fd, b"XY" if create_data else b"tail",
                   offset)
    steps.call("close", os.close, fd)


def probe(directory, name):
    p = lambda leaf: os.path.join(directory, f"{name}.{leaf}")  # noqa: E731
    steps = Steps()
    if name == "open_rdwr_existing":
        make(p("f"))
        open_write_close(steps, p("f"), os.O_RDWR, offset=4)
    elif name == "open_wronly_existing":
        make(p("f"))
        open_write_close(steps, p("f"), os.O_WRONLY, offset=4)
    elif name == "open_append_existing":
        make(p("f"))
        open_write_close(steps, p("f"), os.O_WRONLY | os.O_APPEND)
    elif name == "write_not_at_end":
        open_write_close(steps, p("f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, offset=2, create_data=b"abcdefgh")
    elif name == "truncate":
        make(p("f"))
        steps.call("truncate", os.truncate, p("f"), 2)
    elif name == "fallocate":
        make(p("f"))
        fd = steps.call("open", os.open, p("f"), os.O_WRONLY | os.O_APPEND)
        if fd is not None:
            steps.call("fallocate", fallocate, fd, 0, 4096)
            steps.call("close", os.close, fd)
    elif name == "rename":
        make(p("f"))
        steps.call("rename", os.rename, p("f"), p("g"))
    elif name == "rename_onto_existing":
        make(p("f"))
        make(p("g"), b"old!")
        steps.call("rename", os.rename, p("f"), p("g"))
    else:
        raise ValueError(name)
    return steps.result()


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: store_probe.py DIR", file=sys.stderr)
        return 2
    for name in OPERATIONS:
        print(f"{name}={probe(sys.argv[1], name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
