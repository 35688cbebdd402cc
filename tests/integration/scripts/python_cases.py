"""Python-level scenarios for the integration tests: each prints key=value lines like the C probe.

usage: python_cases.py CASE PATH
"""
import errno
import os
import sys


def show(key, value):
    print(f"{key}={value}", flush=True)


def errno_name(number):
    # Python names 95 ENOTSUP; on Linux it is the same value as EOPNOTSUPP, the name the probe uses.
    return "EOPNOTSUPP" if number == errno.EOPNOTSUPP else errno.errorcode.get(number, str(number))


def attempt(key, fn):
    try:
        show(key, fn())
    except OSError as e:
        show(key, f"-1 errno={errno_name(e.errno)}")


def case_readable(path):
    with open(path, "wb") as f:
        f.write(b"a" * 10)
    with open(path, "r+b", buffering=0) as f:  # unbuffered: the write's own result is shown
        show("readable", f.readable())
        attempt("read", lambda: len(f.read()))
        f.seek(0, os.SEEK_END)
        show("tell", f.tell())
        attempt("write_end", lambda: f.write(b"b" * 5))


def case_appends_unread(path):
    with open(path, "wb") as f:
        f.write(b"a" * 10)
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        attempt("write_end", lambda: f.write(b"b" * 5))


def case_seek_back(path):
    with open(path, "wb") as f:
        f.write(b"a" * 100)
    f = open(path, "r+b", buffering=0)
    f.seek(0)
    attempt("write_back", lambda: f.write(b"b" * 5))
    f.seek(0, os.SEEK_END)
    attempt("write_end", lambda: f.write(b"c" * 5))
    f.close()


def case_os_level(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    attempt("write", lambda: os.write(fd, b"x" * 10))
    attempt("pwrite_back", lambda: os.pwrite(fd, b"y", 0))
    attempt("pwrite_end", lambda: os.pwrite(fd, b"y", 10))
    dup = os.dup(fd)
    attempt("dup_tell", lambda: os.lseek(dup, 0, os.SEEK_CUR))
    attempt("ftruncate", lambda: os.ftruncate(fd, 5))  # below the end (a truncation to 0 empties, as O_TRUNC)
    os.close(dup)
    os.close(fd)


def case_copy(path):
    import shutil
    source = path + ".src"
    with open(source, "wb") as f:
        f.write(bytes(range(256)) * 400)
    shutil.copyfile(source, path)
    show("same", open(source, "rb").read() == open(path, "rb").read())


CASES = {"readable": case_readable, "appends_unread": case_appends_unread, "seek_back": case_seek_back, "os_level": case_os_level, "copy": case_copy}

if __name__ == "__main__":
    CASES[sys.argv[1]](sys.argv[2])
