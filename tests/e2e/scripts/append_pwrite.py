"""Opens PATH O_WRONLY|O_APPEND itself and pwrite()s 16 bytes of b"X" at offset 0: on Linux the kernel
ignores the offset of a write to an O_APPEND descriptor, so without appendguard the bytes silently land
at the end (the program believes it overwrote the start; the file is corrupt). Prints "pwrite=N" or
"pwrite=-1 errno=NAME"; exits 0 when every call ran (whatever pwrite returned), 1 if open or close failed.

usage: append_pwrite.py PATH
"""
import errno
import os
import sys


def main():
    try:
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    except OSError as error:
        print(f"open=-1 errno={errno.errorcode[error.errno]}")
        return 1
    try:
        print(f"pwrite={os.pwrite(fd, b'X' * 16, 0)}")
    except OSError as error:
        name = "EOPNOTSUPP" if error.errno == errno.EOPNOTSUPP else errno.errorcode[error.errno]
        print(f"pwrite=-1 errno={name}")
    try:
        os.close(fd)
    except OSError as error:
        print(f"close=-1 errno={errno.errorcode[error.errno]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
