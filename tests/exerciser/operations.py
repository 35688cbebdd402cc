"""The exerciser's operations: Hypothesis strategies that draw a sequence of driver lines (driver.c), with
the argument shapes real writers use (opens in every mode, writes at, below and past the end, seeks with
every whence, truncations up, down and to 0, preallocation, copies inside one file, renames of a temporary
file, a forked writer). A sequence starts from the files of INITIAL_FILES.

    sequences(max_size=8) -> strategy of [line, ...]
"""
from hypothesis import strategies as st

# Files that exist before every sequence, with their bytes (the judge checks they keep them).
INITIAL_FILES = {
    "old": bytes((i * 7 + 3) % 251 for i in range(300)),
    "keep": b"kept bytes\n" * 5,
}
NAMES = ("old", "new", "tmp", "keep")
MODES = ("r", "r+", "w", "w+", "a", "a+", "x", "x+", "wo", "trunc", "wtrunc")
SLOTS = st.integers(0, 2)
LENGTHS = st.sampled_from((0, 1, 7, 100, 300, 4096, 5000))
OFFSETS = st.sampled_from((0, 5, 100, 299, 300, 301, 1000, 4096, 8192))
SIZES = st.sampled_from((0, 1, 100, 300, 400, 4096, 10000))
# Operations that also run as raw syscall() instructions (a `!` after the name).
RAW = {"open", "close", "write", "writev", "pwrite", "pwritev2", "read", "pread", "lseek", "ftruncate",
       "truncate", "fallocate", "copy_file_range", "fsync", "rename", "unlink"}


def _line(name, raw, *args):
    return " ".join([name + ("!" if raw and name in RAW else ""), *map(str, args)])


def _op(name, *strategies):
    return st.tuples(st.booleans(), *strategies).map(lambda t: _line(name, t[0], *t[1:]))


OPERATIONS = {
    "open": _op("open", SLOTS, st.sampled_from(NAMES), st.sampled_from(MODES)),
    "close": _op("close", SLOTS),
    "dup": _op("dup", SLOTS, SLOTS),
    "write": _op("write", SLOTS, LENGTHS),
    "writev": _op("writev", SLOTS, LENGTHS),
    "pwrite": _op("pwrite", SLOTS, LENGTHS, OFFSETS),
    "pwritev2": _op("pwritev2", SLOTS, LENGTHS, st.one_of(st.just(-1), OFFSETS)),
    "read": _op("read", SLOTS, LENGTHS),
    "pread": _op("pread", SLOTS, LENGTHS, OFFSETS),
    "mmapread": _op("mmapread", SLOTS, LENGTHS, OFFSETS),
    "mmapwrite": _op("mmapwrite", SLOTS, LENGTHS, OFFSETS),
    "lseek": _op("lseek", SLOTS, OFFSETS, st.sampled_from(("set", "cur", "end", "data", "hole"))),
    "ftruncate": _op("ftruncate", SLOTS, SIZES),
    "truncate": _op("truncate", st.sampled_from(NAMES), SIZES),
    "fallocate": _op("fallocate", SLOTS, st.sampled_from(("0", "keep", "punch", "zero")), OFFSETS, LENGTHS),
    "posix_fallocate": _op("posix_fallocate", SLOTS, OFFSETS, LENGTHS),
    "copy_file_range": _op("copy_file_range", SLOTS, st.one_of(st.just(-1), OFFSETS), SLOTS,
                           st.one_of(st.just(-1), OFFSETS), LENGTHS),
    "sendfile": _op("sendfile", SLOTS, SLOTS, st.one_of(st.just(-1), OFFSETS), LENGTHS),
    "fsync": _op("fsync", SLOTS),
    "fchmod": _op("fchmod", SLOTS, st.sampled_from(("600", "644", "444"))),
    "futimens": _op("futimens", SLOTS, st.sampled_from((1000000000, 1700000000))),
    "fstat": _op("fstat", SLOTS),
    "stat": _op("stat", st.sampled_from(NAMES)),
    "rename": _op("rename", st.sampled_from(NAMES), st.sampled_from(NAMES)),
    "unlink": _op("unlink", st.sampled_from(NAMES)),
    "fork": _op("fork", SLOTS, LENGTHS),
}
# Opens and writes drawn more often: most operations need an open descriptor to do anything.
WEIGHTS = {"open": 4, "write": 2, "pwrite": 2, "ftruncate": 2, "close": 2}


def operation():
    return st.one_of(*[strategy for name, strategy in OPERATIONS.items() for _ in range(WEIGHTS.get(name, 1))])


def sequences(max_size=8):
    return st.lists(operation(), min_size=1, max_size=max_size)
