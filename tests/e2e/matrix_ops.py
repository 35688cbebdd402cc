"""The operations of the conformance matrix (tests/e2e/test_matrix.py), run by one process per store and
mode so that torch is imported once: `setup` (always without the library) creates each operation's
pre-existing files, `act` performs the operation (under the library or not, as the caller decides).

usage: matrix_ops.py setup|act LOGDIR SRCDIR DIR...

Operation NAME works in DIR/NAME. `setup` runs once, on a local disk, without the library; the test copies
its result onto each store (a sequential write of a new file, which every store accepts) before `act`.
LOGDIR (on a local disk) receives I/NAME.err for the I-th DIR (what the operation printed on fd 2, the
library's lines included: fd 2 is redirected there while it runs). SRCDIR (local) holds the source files
of cp, dd, rsync, tar. `act` prints one JSON line per operation and DIR:
{"dir": I, "op": NAME, "ok": true|false, "error": "..."}. One `act` process serves every store of a mode,
so torch is imported once per mode.

Operations whose `act` calls a program (cp, dd, bash, tee, rsync, tar, a second python) run it as a child,
which inherits the library's LD_PRELOAD; the rest run in this process. An operation is "ok" when every
call succeeded (a child: exit status 0). Data is deterministic, so that a local run is the reference.
"""
import array
import ctypes
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "realclients"))

OLD = bytes((i * 7 + 3) % 251 for i in range(4096))  # a pre-existing file's bytes
NEW = bytes((i * 13 + 5) % 241 for i in range(6000))  # what the operation writes
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_APPEND_FL = 0x80086601, 0x40086602, 0x20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def set_append_only(path, on=True):
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] = flags[0] | FS_APPEND_FL if on else flags[0] & ~FS_APPEND_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
    finally:
        os.close(fd)


def put(path, data=OLD):
    with open(path, "wb") as f:
        f.write(data)


def child(argv, **kw):
    """Runs argv (inheriting fd 2 and LD_PRELOAD); raises when it fails."""
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited with status {proc.returncode}")


class Ctx:
    def __init__(self, directory, src):
        self.d = directory
        self.src = src

    def p(self, name="f"):
        return os.path.join(self.d, name)

    def s(self, name):
        return os.path.join(self.src, name)


# ---- the light operations (no torch) ------------------------------------------------------------------

_READER = ("import hashlib, sys\n"
           "path = sys.stdin.readline().strip()\n"
           "try:\n"
           "    print(hashlib.sha256(open(path, 'rb').read()).hexdigest())\n"
           "except OSError as error:\n"
           "    print(f'{type(error).__name__}: {error}')\n")


def act_read_by_other(c, name="f", data=NEW):
    """Another process reads the file as soon as this one has closed it (another rank after a barrier). It
    is started before the write, so it holds no copy of this process's descriptors."""
    path = c.p(name)
    reader = subprocess.Popen([sys.executable, "-c", _READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        with open(path, "wb") as f:
            f.write(data)
        out, _ = reader.communicate(path + "\n", timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    if out.strip() != hashlib.sha256(data).hexdigest():
        raise RuntimeError(f"another process reading the file: {out.strip()}")


def act_read_by_other_named(c):
    """A whole safetensors file written with "wb" (safetensors 0.7's save_file; guarded by name), read by
    another process once closed."""
    import numpy as np
    from safetensors.numpy import save
    act_read_by_other(c, "model.safetensors", save({"w": np.arange(256, dtype=np.float32)}))

def act_fsync_then_write(c):
    """fsync before the bytes are written, then write and close: DCP's FileSystemWriter does this with
    .metadata.tmp (os.fsync while pickle's bytes are still in Python's buffer). mountpoint-s3 ends the upload
    at an fsync and refuses later writes (EIO)."""
    fd = os.open(c.p(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.fsync(fd)
        if os.write(fd, NEW) != len(NEW):
            raise RuntimeError("short write")
    finally:
        os.close(fd)


def make_sources(src):
    """The local source files of cp, dd, rsync, tar (made by the test before any run)."""
    os.makedirs(src, exist_ok=True)
    put(os.path.join(src, "new"), NEW)
    tree = os.path.join(src, "tree")
    os.makedirs(os.path.join(tree, "sub"), exist_ok=True)
    put(os.path.join(tree, "a.bin"), NEW)
    put(os.path.join(tree, "sub", "b.bin"), NEW[:1000])
    for path in (os.path.join(tree, "a.bin"), os.path.join(tree, "sub", "b.bin"), os.path.join(tree, "sub"), tree):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    subprocess.run(["tar", "-cf", os.path.join(src, "tree.tar"), "-C", tree, "."], check=True)


def act_create(c):
    with open(c.p(), "wb") as f:
        f.write(NEW)


def act_overwrite_wb(c):
    with open(c.p(), "wb") as f:
        f.write(NEW)


def act_overwrite_idiom(c):
    # The exit-0 idiom: an error at close is printed by CPython ("Exception ignored") and lost.
    child([sys.executable, "-c", "import sys; open(sys.argv[1], 'wb').write(open(sys.argv[2], 'rb').read())",
           c.p(), c.s("new")])


def act_overwrite_cp(c):
    child(["cp", c.s("new"), c.p()])


def act_append_shell(c):
    child(["bash", "-c", 'cat "$1" >> "$2"', "bash", c.s("new"), c.p()])


def act_append_dd(c):
    child(["dd", f"if={c.s('new')}", f"of={c.p()}", "oflag=append", "conv=notrunc", "status=none"])


def act_append_os(c):
    fd = os.open(c.p(), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, NEW)
    finally:
        os.close(fd)


def act_append_ab(c):
    with open(c.p(), "ab") as f:
        f.write(NEW)


def act_append_tee(c):
    child(["bash", "-c", 'tee -a "$2" < "$1" > /dev/null', "bash", c.s("new"), c.p()])


def act_rplus_end(c):
    with open(c.p(), "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(NEW)


def setup_guarded(c):
    put(c.p("f.safetensors"))  # a name the library guards on every store (APPENDGUARD_PATHS' default)


def act_write_below_end(c):
    with open(c.p("f.safetensors"), "r+b") as f:
        f.write(b"XY")  # at offset 0 of a 4096-byte file


def act_dd_seek_end(c):
    child(["dd", f"if={c.s('new')}", f"of={c.p()}", "bs=4096", "seek=1", "conv=notrunc", "status=none"])


def act_prealloc_fallocate(c):
    fd = os.open(c.p(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if _libc.fallocate(fd, 0, 0, len(NEW)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"fallocate: {os.strerror(code)}")
        os.write(fd, NEW)
    finally:
        os.close(fd)


def act_prealloc_ftruncate(c):
    fd = os.open(c.p(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, len(NEW))
        os.write(fd, NEW)
    finally:
        os.close(fd)


def act_rename_new(c):
    put(c.p("f.tmp"), NEW)
    os.rename(c.p("f.tmp"), c.p())


def act_rename_onto(c):
    put(c.p("f.tmp"), NEW)
    os.rename(c.p("f.tmp"), c.p())


def act_rsync(c):
    child(["rsync", c.s("new"), c.p()])


def act_rsync_inplace(c):
    child(["rsync", "--inplace", c.s("new"), c.p()])


def act_tar_twice(c):
    for _ in range(2):
        child(["tar", "-xf", c.s("tree.tar"), "-C", c.d])


def act_np_save_twice(c):
    import numpy as np
    np.save(c.p("a.npy"), np.arange(1000, dtype=np.float32))
    np.save(c.p("a.npy"), np.arange(1500, dtype=np.float64))


def setup_np_save_twice(c):
    import numpy as np
    np.save(c.p("a.npy"), np.arange(10, dtype=np.int8))


# ---- the real clients (torch) -----------------------------------------------------------------------

def _state(seed):
    import clients
    import torch
    tensors = clients.state_dict()
    if seed:
        tensors = {k: v + torch.tensor(seed, dtype=v.dtype) for k, v in tensors.items()}
    return tensors


def act_torch_save(c):
    import torch
    torch.save(_state(0), c.p("model.pt"))


def setup_torch_save_twice(c):
    import torch
    torch.save(_state(1), c.p("model.pt"))


def act_save_file(c):
    from safetensors.torch import save_file
    save_file(_state(0), c.p("model.safetensors"))


def setup_save_file_again(c):
    from safetensors.torch import save_file
    save_file(_state(1), c.p("model.safetensors"))


def _model(seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, vocab_size=128))


def act_save_pretrained(c):
    _model(0).save_pretrained(c.d, max_shard_size="40KB")


def setup_save_pretrained_again(c):
    _model(1).save_pretrained(c.d, max_shard_size="40KB")


def _dcp_save(directory, seed, consolidate=True):
    import clients
    import torch.distributed.checkpoint as dcp
    tensors = _state(seed)
    dcp.save(tensors, storage_writer=clients.hf_writer(directory, tensors, consolidate=consolidate))


def act_dcp_save(c):
    _dcp_save(c.d, 0)


def setup_dcp_save_again(c):
    _dcp_save(c.d, 1)


def setup_dcp_consolidate(c):
    _dcp_save(c.p("shards"), 0, consolidate=False)
    os.makedirs(c.p("hf"))


def act_dcp_consolidate(c):
    import clients
    from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files
    tensors = _state(0)
    consolidate_safetensors_files(c.p("shards"), c.p("hf"), clients.mapping(tensors), num_threads=4)
    clients.check_consolidated(c.p("hf"), tensors)


def setup_f(c):
    put(c.p())


def nothing(c):
    pass


# name -> (setup, act, what it does); the order is the matrix's.
OPERATIONS = {
    "create": (nothing, act_create, 'new file, `"wb"`'),
    "overwrite_wb": (setup_f, act_overwrite_wb, 'existing file, `"wb"` with a checked close'),
    "overwrite_idiom": (setup_f, act_overwrite_idiom, 'existing file, `open(p, "wb").write(b)` (exit 0 idiom)'),
    "overwrite_cp": (setup_f, act_overwrite_cp, "`cp` onto an existing file"),
    "append_shell": (setup_f, act_append_shell, "bash `>>` (append, no seek)"),
    "append_dd": (setup_f, act_append_dd, "`dd oflag=append conv=notrunc` (append, no seek)"),
    "append_os": (setup_f, act_append_os, "`os.open(O_APPEND)` + `write` (append, no seek)"),
    "append_ab": (setup_f, act_append_ab, '`"ab"` (append, seeks to the end)'),
    "append_tee": (setup_f, act_append_tee, "`tee -a`"),
    "rplus_end": (setup_f, act_rplus_end, '`"r+b"`, seek to the end, write'),
    "write_below_end": (setup_guarded, act_write_below_end, '`"r+b"`, write at 0 of a `.safetensors` file (must be refused)'),
    "dd_seek_end": (setup_f, act_dd_seek_end, "`dd seek=N conv=notrunc` at the exact end"),
    "prealloc_fallocate": (nothing, act_prealloc_fallocate, "new file, `fallocate` then write"),
    "prealloc_ftruncate": (nothing, act_prealloc_ftruncate, "new file, `ftruncate` then write"),
    "rename_new": (nothing, act_rename_new, "write a temporary file, rename it to a new name"),
    "rename_onto": (setup_f, act_rename_onto, "write a temporary file, rename it onto an existing file"),
    "rsync": (setup_f, act_rsync, "`rsync` update of an existing file"),
    "rsync_inplace": (setup_f, act_rsync_inplace, "`rsync --inplace` update of an existing file"),
    "tar_twice": (nothing, act_tar_twice, "`tar -x` of a tree, twice"),
    "np_save_twice": (setup_np_save_twice, act_np_save_twice, "`np.save` onto an existing file, twice"),
    "torch_save": (nothing, act_torch_save, "`torch.save`, new file"),
    "torch_save_twice": (setup_torch_save_twice, act_torch_save, "`torch.save` onto an existing file"),
    "save_file": (nothing, act_save_file, "safetensors `save_file`, new file"),
    "save_file_again": (setup_save_file_again, act_save_file, "`save_file` onto an existing file"),
    "save_pretrained": (nothing, act_save_pretrained, "transformers `save_pretrained`, 40 KB shards"),
    "save_pretrained_again": (setup_save_pretrained_again, act_save_pretrained,
                              "a second `save_pretrained` into the same folder"),
    "dcp_save": (nothing, act_dcp_save, "`dcp.save` with the HF writer and consolidation"),
    "dcp_save_again": (setup_dcp_save_again, act_dcp_save, "a second `dcp.save` into the same folder"),
    "dcp_consolidate": (setup_dcp_consolidate, act_dcp_consolidate,
                        "`consolidate_safetensors_files` of existing shards, 4 threads"),
    "read_by_other": (nothing, act_read_by_other, 'new file, `"wb"`, read by another process once closed'),
    "fsync_then_write": (nothing, act_fsync_then_write, "new file, `fsync` before its bytes are written"),
    "read_by_other_named": (nothing, act_read_by_other_named,
                            'a whole `*.safetensors` file written `"wb"` (guarded by name), read by another '
                            'process once closed'),
}
# Operations the library must refuse (a loud failure, files intact) wherever they would run.
MUST_REFUSE = {"write_below_end"}


def run_ops(phase, log_dir, src, dirs):
    saved = os.dup(2)
    for index, directory in enumerate(dirs):
        os.makedirs(os.path.join(log_dir, str(index)), exist_ok=True)
        for name, (setup, act, _) in OPERATIONS.items():
            c = Ctx(os.path.join(directory, name), src)
            if phase == "setup":
                os.makedirs(c.d, exist_ok=True)
                setup(c)
                continue
            log = os.open(os.path.join(log_dir, str(index), f"{name}.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o644)
            os.dup2(log, 2)
            os.close(log)
            result = {"dir": index, "op": name, "ok": True, "error": ""}
            try:
                act(c)
            except BaseException as error:  # noqa: B902 (every failure is a result)
                traceback.print_exc()
                result = {"dir": index, "op": name, "ok": False, "error": f"{type(error).__name__}: {error}"[:300]}
            sys.stderr.flush()
            os.dup2(saved, 2)
            print(json.dumps(result), flush=True)
    os.close(saved)


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[0] not in ("setup", "act"):
        print(__doc__, file=sys.stderr)
        return 2
    phase, log_dir, src, dirs = args[0], args[1], args[2], args[3:]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    run_ops(phase, log_dir, src, dirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
