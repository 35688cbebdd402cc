"""Performs each file operation that append-only stores restrict, in a directory of a mount, and prints
one line per operation: NAME=RESULT. RESULT is "0" when every call succeeded and the file holds what a
normal file would, else the failing calls with their errno names ("write ESPIPE, close EPERM"), then,
after "; ", what is wrong with the file if it is neither what a normal file would hold nor unchanged
("file emptied", "appended at the end", "size unchanged", "bytes lost"). docs/stores.md holds the table of these results per store;
tests/e2e/test_stores.py checks that it matches what this prints.

usage: store_probe.py [--append-only] DIR

  open_rdwr_existing    open(O_RDWR) of an existing 4-byte file, write 4 bytes at offset 4, close
  open_wronly_existing  open(O_WRONLY) (no O_TRUNC, no O_APPEND) of an existing file, write at 4, close
  open_append_existing  open(O_WRONLY|O_APPEND) of an existing file, write, close
  write_not_at_end      new file: write 8 bytes, pwrite 2 bytes at offset 2, close
  truncate              truncate(2) an existing 4-byte file to 2 bytes
  fallocate             fallocate(fd, 0, 0, 4096) on an O_WRONLY|O_APPEND descriptor of an existing file
  rename                rename(2) an existing file to a new name
  rename_onto_existing  rename(2) an existing file onto another existing file

--append-only: set the kernel append-only attribute (chattr +a, FS_APPEND_FL) on every file once it holds
its first bytes (write_not_at_end: on the new empty file, which is then opened O_WRONLY|O_APPEND), and
clear it on every file of DIR before exiting. Needs CAP_LINUX_IMMUTABLE.
"""
import array
import ctypes
import errno
import fcntl
import os
import sys

OPERATIONS = ["open_rdwr_existing", "open_wronly_existing", "open_append_existing", "write_not_at_end",
              "truncate", "fallocate", "rename", "rename_onto_existing"]
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_APPEND_FL = 0x80086601, 0x40086602, 0x20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def errno_name(code):
    if code == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"  # Python names 95 ENOTSUP, the same number on Linux
    return errno.errorcode.get(code, str(code))


def set_append_only(path, on):
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] = flags[0] | FS_APPEND_FL if on else flags[0] & ~FS_APPEND_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
    finally:
        os.close(fd)


def fallocate(fd, offset, length):
    if _libc.fallocate(fd, 0, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def contents(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


class Probe:
    def __init__(self, directory, append_only):
        self.directory = directory
        self.append_only = append_only
        self.failed = []

    def p(self, name, leaf):
        return os.path.join(self.directory, f"{name}.{leaf}")

    def make(self, path, data=b"head"):
        with open(path, "wb") as f:
            f.write(data)
        if self.append_only:
            set_append_only(path, True)

    def call(self, label, function, *args):
        """Runs function(*args); records "label ERRNO" and returns None if it raised OSError."""
        try:
            return function(*args)
        except OSError as error:
            self.failed.append(f"{label} {errno_name(error.errno)}")
            return None

    def write_close(self, path, flags, writes):
        """open(path, flags); writes is a list of (label, data, offset or None); close."""
        fd = self.call("open", os.open, path, flags)
        if fd is None:
            return
        for label, data, offset in writes:
            if offset is None:
                self.call(label, os.write, fd, data)
            else:
                self.call(label, os.pwrite, fd, data, offset)
        self.call("close", os.close, fd)

    def run(self, name):
        self.failed = []
        f, g = self.p(name, "f"), self.p(name, "g")
        expected = None  # what the file (f) holds after a normal file's success
        before = b"head"  # what it holds if the operation changed nothing
        if name in ("open_rdwr_existing", "open_wronly_existing", "open_append_existing"):
            self.make(f)
            flags = {"open_rdwr_existing": os.O_RDWR, "open_wronly_existing": os.O_WRONLY,
                     "open_append_existing": os.O_WRONLY | os.O_APPEND}[name]
            offset = None if flags & os.O_APPEND else 4
            self.write_close(f, flags, [("write", b"tail", offset)])
            expected = b"headtail"
        elif name == "write_not_at_end":
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            if self.append_only:
                self.make(f, b"")
                flags = os.O_WRONLY | os.O_APPEND
            self.write_close(f, flags, [("write", b"abcdefgh", None), ("pwrite", b"XY", 2)])
            expected, before = b"abXYefgh", b"abcdefgh"
        elif name == "truncate":
            self.make(f)
            self.call("truncate", os.truncate, f, 2)
            expected = b"he"
        elif name == "fallocate":
            self.make(f)
            fd = self.call("open", os.open, f, os.O_WRONLY | os.O_APPEND)
            if fd is not None:
                self.call("fallocate", fallocate, fd, 0, 4096)
                self.call("close", os.close, fd)
        elif name == "rename":
            self.make(f)
            self.call("rename", os.rename, f, g)
        elif name == "rename_onto_existing":
            self.make(f)
            self.make(g, b"old!")
            self.call("rename", os.rename, f, g)
        else:
            raise ValueError(name)
        result = ", ".join(self.failed) if self.failed else "0"
        if expected is not None:
            data = contents(f)
            problem = None if self.failed and data == before else self.file_problem(data, expected)
            if problem:
                result += f"; {problem}"
        return result

    @staticmethod
    def file_problem(data, expected):
        if data == expected:
            return None
        if data == b"":
            return "file emptied"
        if expected == b"abXYefgh" and data == b"abcdefghXY":
            return "appended at the end"
        if expected == b"he" and data == b"head":
            return "size unchanged"
        if expected == b"headtail" and data == b"head":
            return "bytes lost"
        return f"file holds {len(data)} bytes" if data is not None else "file unreadable"

    def clear_attributes(self):
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if os.path.isfile(path):
                set_append_only(path, False)


def main():
    args = sys.argv[1:]
    append_only = "--append-only" in args
    args = [a for a in args if a != "--append-only"]
    if len(args) != 1 or not os.path.isdir(args[0]):
        print("usage: store_probe.py [--append-only] DIR", file=sys.stderr)
        return 2
    probe = Probe(args[0], append_only)
    try:
        for name in OPERATIONS:
            print(f"{name}={probe.run(name)}", flush=True)
    finally:
        if append_only:
            probe.clear_attributes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
