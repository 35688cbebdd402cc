"""Where writes land (issues 23 and 24): `landing.py CASE PATH [ARGS]`, one case per run.

append_no_seek PATH DATA    os.open(O_WRONLY|O_APPEND) + write, no seek (the `>>` idiom)
pwrite_on_append PATH       the program's own O_APPEND descriptor: pwrite at 0 and pwritev at 1 (the kernel
                            appends both)
rwf_append PATH             an O_WRONLY descriptor: pwritev2(.., 0, RWF_APPEND) (the kernel appends)
odirect_unaligned PATH      O_RDWR|O_DIRECT, a 3-byte write at the end (EINVAL on a local disk: the program's own)
copy_from_rdwr PATH OUT     the guarded O_RDWR descriptor as the input of copy_file_range, sendfile, splice
Prints `CALL=ok` or `CALL=ERRNONAME` per call.
"""
import errno
import os
import sys


def attempt(name, call):
    try:
        call()
        print(f"{name}=ok", flush=True)
    except OSError as e:
        print(f"{name}={errno.errorcode.get(e.errno, e.errno)}", flush=True)


def main():
    case, path = sys.argv[1], sys.argv[2]
    if case == "append_no_seek":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        attempt("write", lambda: os.write(fd, sys.argv[3].encode()))
        os.close(fd)
    elif case == "pwrite_on_append":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        attempt("pwrite", lambda: os.pwrite(fd, b"P", 0))
        attempt("pwritev", lambda: os.pwritev(fd, [b"Q"], 1))
        attempt("pwritev2", lambda: os.pwritev(fd, [b"R"], 2, 0))
        os.close(fd)
    elif case == "rwf_append":
        fd = os.open(path, os.O_WRONLY)
        attempt("pwritev2", lambda: os.pwritev(fd, [b"A"], 0, os.RWF_APPEND))
        os.close(fd)
    elif case == "odirect_unaligned":
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        os.lseek(fd, 0, os.SEEK_END)
        attempt("write", lambda: os.write(fd, b"xyz"))
        os.close(fd)
    elif case == "copy_from_rdwr":
        fd = os.open(path, os.O_RDWR)
        out = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        attempt("copy_file_range", lambda: os.copy_file_range(fd, out, 4, 0))
        attempt("sendfile", lambda: os.sendfile(out, fd, 0, 4))
        r, w = os.pipe()
        attempt("splice", lambda: os.splice(fd, w, 4, offset_src=0))
        os.close(fd)
        os.close(out)
    else:
        sys.exit(f"unknown case {case}")


if __name__ == "__main__":
    main()
