"""e2e.test_new_user_stores: the third adversarial round, "a new user on real stores" (docs/reliability.md).

Everyday operations on checkpoint directories (Python's zipfile in mode "a", "w+b" on an existing file,
`dd oflag=append` without conv=notrunc, `truncate -s 0`, `split` over old parts, Python's truncate(0),
os.truncate) run on real stores, once without the library and once with `APPENDGUARD=1` alone, each compared
with the same operation on a local disk. The rule (issue 23): with the library an operation is
byte-identical to the local run, or fails loudly (an `appendguard:` line) leaving every pre-existing file
intact; what works without the library works with it.

The stores are mounted once for the module (matrix_stores: appendonlyfs hdfs, strict, s3; rclone
--vfs-cache-mode off over a local folder; a tmpfs whose pre-existing files carry chattr +a). A store that
cannot be mounted skips (77), or fails under APPENDGUARD_REQUIRE_FUSE=1.
"""
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import zipfile

import e2e_support
import matrix_ops
import matrix_stores
from e2e_support import PYTHON, harness

TMP = os.environ.get("APPENDGUARD_E2E_TMP", tempfile.gettempdir())
OLD, NEW = matrix_ops.OLD, matrix_ops.NEW
STORE_KEYS = ("aofs-hdfs", "aofs-strict", "aofs-s3", "rclone-off", "chattr")


def a_zip():
    """A small archive, the same bytes every time (fixed dates)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(zipfile.ZipInfo("weights.bin", (2020, 1, 1, 0, 0, 0)), NEW[:3000])
    return out.getvalue()


ZIP_APPEND = ("import sys, zipfile\n"
              "z = zipfile.ZipFile(sys.argv[1], 'a')\n"
              "z.writestr(zipfile.ZipInfo('more.bin', (2020, 1, 1, 0, 0, 0)), b'hello' * 100)\n"
              "z.close()\n")
W_PLUS = ("import sys\n"
          "with open(sys.argv[1], 'w+b') as f:\n"
          "    f.write(b'abc' * 100)\n"
          "    f.seek(0)\n"
          "    assert f.read() == b'abc' * 100\n")
PY_TRUNCATE = ("import sys\n"
               "with open(sys.argv[1], 'r+b') as f:\n"
               "    f.truncate(0)\n"
               "    f.write(b'abc' * 100)\n")
OS_TRUNCATE = "import os, sys; os.truncate(sys.argv[1], 0)"
TWO_APPENDERS = ("import subprocess, sys\n"
                 "with open(sys.argv[1], 'ab') as f:\n"
                 "    f.write(b'1' * 10)\n"
                 "    f.flush()\n"
                 "    subprocess.run(['bash', '-c', 'printf 2222 >> ' + sys.argv[1]], check=True)\n"
                 "    f.write(b'3' * 10)\n")


class Run:
    def __init__(self, proc, before, after):
        self.status, self.output, self.before, self.after = proc.returncode, proc.stdout, before, after

    @property
    def loud(self):
        return "appendguard: " in self.output

    def __repr__(self):
        return f"status {self.status}, files {sorted((k, len(v)) for k, v in self.after.items())}\n{self.output[-3000:]}"


class StoresTest(unittest.TestCase):
    """Mounts the class's MOUNT stores once for its tests; runs operations there and on a local disk."""
    MOUNT = ()
    stack = None

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="new-user-", dir=TMP)
        cls.src = os.path.join(cls.root, "src")
        os.makedirs(cls.src)
        with open(os.path.join(cls.src, "new"), "wb") as f:
            f.write(NEW)
        cls.stack = contextlib.ExitStack()
        cls.stores = {}
        try:
            for key in cls.MOUNT:
                base = os.path.join(cls.root, key)
                os.makedirs(base)
                cls.stores[key] = cls.stack.enter_context(matrix_stores.mounted_store(key, base, None))
        except (matrix_stores.StoreMissing, RuntimeError) as missing:
            cls.stack.close()
            if e2e_support.aofs.fuse_required():
                raise
            raise unittest.SkipTest(str(missing))
        cls.count = 0

    @classmethod
    def tearDownClass(cls):
        if cls.stack:
            cls.stack.close()
        shutil.rmtree(cls.root, ignore_errors=True)

    def run_case(self, where, files, command, lib):
        """Makes a fresh folder in `where` (a store key, or "local"), writes `files` ({name: bytes}) there
        without the library (chattr +a on them on the chattr store), runs `command` (bash, $D the folder, $S
        the local sources, $PY Python) without or with the library; returns a Run."""
        type(self).count += 1
        base = os.path.join(self.root, "local") if where == "local" else self.stores[where]
        d = os.path.join(base, f"{self.count}-{'lib' if lib else 'plain'}")
        os.makedirs(d)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            if where == "chattr":
                matrix_ops.set_append_only(os.path.join(d, name))
        before = e2e_support.files_of(d)
        env = harness.child_env(mode="1" if lib else None, preload=lib, D=d, S=self.src, PY=PYTHON)
        proc = subprocess.run(["bash", "-c", command], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
        if where.startswith("rclone"):
            time.sleep(0.3)  # the upload ends after the close
        return Run(proc, before, e2e_support.files_of(d))

    def local(self, files, command):
        run = self.run_case("local", files, command, False)
        self.assertEqual(run.status, 0, f"the local run failed: {run}")
        return run.after

    def assert_identical_or_loud_and_intact(self, store, run, local_after):
        if run.status == 0 and run.after == local_after:
            return
        self.assertNotEqual(run.status, 0, f"{store}: exit 0 with other bytes than the local run: {run}")
        self.assertTrue(run.loud, f"{store}: failed without an appendguard line: {run}")
        self.assertEqual(run.after, run.before, f"{store}: failed and a pre-existing file changed: {run}")



class NewUserOnStores(StoresTest):
    MOUNT = STORE_KEYS

    # ---- a read refused on a handle made write-only: no write afterwards (zipfile's mode "a")

    def test_zipfile_append_is_refused_and_the_archive_kept(self):
        """zipfile.ZipFile(p, "a") reads the archive's end through its "r+b" handle; appendguard made that
        handle write-only, the read failed, zipfile took the file for no archive and appended a new one,
        then seeked back to patch it: the archive grew by 535 bytes of a broken member on every store (exit
        1). Now the writes after the failed read are refused: the archive keeps its bytes."""
        files = {"ckpt.zip": a_zip()}
        command = f'"$PY" -c "{ZIP_APPEND}" "$D/ckpt.zip"'
        local_after = self.local(files, command)
        for store in STORE_KEYS:
            with self.subTest(store):
                run = self.run_case(store, files, command, True)
                self.assert_identical_or_loud_and_intact(store, run, local_after)
                self.assertEqual(run.after, run.before, f"{store}: the archive changed: {run}")

    # ---- "w+b" on an existing file: O_WRONLY|O_TRUNC, as "wb"

    def test_w_plus_of_an_existing_file_writes_its_bytes(self):
        """open(p, "w+b") on an existing file: appendguard made it O_WRONLY|O_TRUNC|O_APPEND, and rclone
        --vfs-cache-mode off fails every write of an O_APPEND descriptor of an existing file (ESPIPE): the
        file was left empty. Now "w+b" is opened as "wb" is: the file holds the bytes written, and the read
        back (a write-only handle) fails loudly."""
        files = {"f": OLD}
        command = f'"$PY" -c "{W_PLUS}" "$D/f"'
        for store in ("rclone-off", "aofs-s3", "aofs-hdfs"):
            with self.subTest(store):
                run = self.run_case(store, files, command, True)
                self.assertNotEqual(run.status, 0, run)
                self.assertIn("appendguard: violation: read", run.output, run)
                self.assertEqual(run.after, {"f": b"abc" * 100}, f"{store}: {run}")

    def test_dd_append_without_notrunc_on_a_write_once_store(self):
        """`dd oflag=append` without conv=notrunc opens O_WRONLY|O_CREAT|O_TRUNC|O_APPEND: on rclone
        --vfs-cache-mode off every write failed ESPIPE after the truncation, with or without the library:
        the file was left empty. With the library the program's O_APPEND is now carried out by the library
        on a write-once store (as for a file written anew): identical to the local run."""
        files = {"f": OLD}
        command = 'dd if="$S/new" of="$D/f" oflag=append status=none'
        local_after = self.local(files, command)
        for store in ("rclone-off", "aofs-s3", "aofs-hdfs"):
            with self.subTest(store):
                run = self.run_case(store, files, command, True)
                self.assertEqual((run.status, run.after), (0, local_after), f"{store}: {run}")

    # ---- truncation to 0: passed on as an O_TRUNC open is

    TRUNCATIONS = {
        "truncate -s 0": 'truncate -s 0 "$D/f"',
        "truncate -s 0, then >>": 'truncate -s 0 "$D/f" && cat "$S/new" >> "$D/f"',
        "split over an old part": 'split -b 1000 "$S/new" "$D/part_"',
        "Python truncate(0), then write": f'"$PY" -c "{PY_TRUNCATE}" "$D/f"',
        "os.truncate(p, 0)": f'"$PY" -c "{OS_TRUNCATE}" "$D/f"',
    }

    def truncation_files(self, name):
        return {"part_aa": OLD} if name == "split over an old part" else {"f": OLD}

    def test_truncation_to_zero_works_where_it_works_without(self):
        """On HDFS (appendonlyfs hdfs) a truncation to 0 empties the file, without the library. With it,
        `truncate -s 0`, split over an existing part and Python's truncate(0) were refused ("changes the size
        of a file on an append-only mount"), exit 1, though an O_TRUNC open of the same file is let through.
        Now they are passed on: identical to the local run, as without the library."""
        for name, command in self.TRUNCATIONS.items():
            files = self.truncation_files(name)
            local_after = self.local(files, command)
            with self.subTest(name):
                if "Python" not in name:  # without the library "r+b" is a read stream there: its write fails
                    plain = self.run_case("aofs-hdfs", files, command, False)
                    self.assertEqual((plain.status, plain.after), (0, local_after), f"without the library: {plain}")
                run = self.run_case("aofs-hdfs", files, command, True)
                self.assertEqual((run.status, run.after), (0, local_after), f"with the library: {run}")

    def test_truncation_to_zero_refused_by_the_store_is_loud(self):
        """Where the store refuses the truncation (appendonlyfs strict, chattr +a, appendonlyfs s3), or where
        the library wrote the file anew at the open (a write-once store), the call fails with one
        appendguard line and the file keeps its bytes. os.truncate of a chattr +a file (guarded neither by
        name nor by a mount) failed EPERM without a line before; one line names the attribute now."""
        for store in ("aofs-strict", "chattr", "aofs-s3", "rclone-off"):
            for name, command in self.TRUNCATIONS.items():
                files = self.truncation_files(name)
                local_after = self.local(files, command)
                with self.subTest(f"{store}: {name}"):
                    run = self.run_case(store, files, command, True)
                    self.assert_identical_or_loud_and_intact(store, run, local_after)


class ReadWriteOnRcloneMinimal(StoresTest):
    """rclone --vfs-cache-mode minimal serves a read-write or appending open from its local cache: sqlite,
    zipfile's mode "a", `tar -r`, "r+b" writes in place, "a+b" then reading back, two processes appending
    work there without the library. The
    library took the mount for a write-once one and rewrote each such open into a write-only one written
    anew: all of them failed (sqlite3 "disk I/O error", zipfile appended a second archive). Now a read-write
    open there is kept as asked and tracked: writes below the end of a file no pattern names go through,
    a `*.safetensors` file's are still refused, size changes keep their rules."""

    MOUNT = ("rclone-minimal",)
    CASES = {
        "sqlite3 insert into an existing database": (
            {"db": None}, 'sqlite3 "$D/db" "insert into t values(2);"'),
        "zipfile mode a": ({"ckpt.zip": a_zip()}, f'"$PY" -c "{ZIP_APPEND}" "$D/ckpt.zip"'),
        "tar -r": (None, 'tar -rf "$D/x.tar" -C "$S" new'),
        "r+b write at 0": ({"f": OLD}, '"$PY" -c "import sys; f = open(sys.argv[1], \'r+b\'); f.write(b\'XY\')" "$D/f"'),
        "two processes appending": ({"f": OLD}, f'"$PY" -c "{TWO_APPENDERS}" "$D/f"'),
        "a+b write then read back": ({"f": OLD}, '"$PY" -c "import sys; f = open(sys.argv[1], \'a+b\'); '
                                                 'f.write(b\'more\'); f.seek(0); assert len(f.read()) == 4100" "$D/f"'),
    }

    def files_for(self, name, files):
        if files is None:  # a tar archive of one file, made locally
            out = io.BytesIO()
            with tarfile.open(fileobj=out, mode="w") as t:
                info = tarfile.TarInfo("old")
                info.size, info.mtime = len(OLD), 1_700_000_000
                t.addfile(info, io.BytesIO(OLD))
            return {"x.tar": out.getvalue()}
        if "db" in files:
            directory = tempfile.mkdtemp(dir=self.root)
            subprocess.run(["sqlite3", os.path.join(directory, "db"), "create table t(x); insert into t values(1);"],
                           check=True)
            with open(os.path.join(directory, "db"), "rb") as f:
                return {"db": f.read()}
        return files

    def test_read_write_opens_work_as_without_the_library(self):
        for name, (files, command) in self.CASES.items():
            files = self.files_for(name, files)
            local_after = self.local(files, command)
            with self.subTest(name):
                plain = self.run_case("rclone-minimal", files, command, False)
                self.assertEqual((plain.status, plain.after), (0, local_after), f"without the library: {plain}")
                run = self.run_case("rclone-minimal", files, command, True)
                self.assertEqual((run.status, run.after), (0, local_after), f"with the library: {run}")

    def test_a_safetensors_file_is_still_refused_below_its_end(self):
        files = {"m.safetensors": OLD}
        run = self.run_case("rclone-minimal", files,
                            '"$PY" -c "import sys; f = open(sys.argv[1], \'r+b\', buffering=0); f.write(b\'XY\')" '
                            '"$D/m.safetensors"', True)
        self.assertNotEqual(run.status, 0, run)
        self.assertIn("appendguard: violation: write", run.output, run)
        self.assertEqual(run.after, run.before, run)

    def test_a_refused_shrink_stops_the_writes_in_place(self):
        """`dd seek=5 bs=100` without conv=notrunc opens O_RDWR, truncates to 500 and writes at 500: rclone
        minimal drops the shrink silently (the file keeps its 4096 bytes, exit 0, without the library). With
        it the shrink is refused (a violation), and so are the writes in place after it: the file intact."""
        files = {"f": OLD}
        run = self.run_case("rclone-minimal", files, 'dd if="$S/new" of="$D/f" bs=100 count=1 seek=5 status=none', True)
        self.assertIn("appendguard: violation: ftruncate", run.output, run)
        self.assertEqual(run.after, run.before, run)


def main():
    e2e_support.aofs.skip_or_fail_without_fuse("the new-user operations on stores")
    e2e_support.check_library_is_effective()
    e2e_support.install_signal_handlers()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
