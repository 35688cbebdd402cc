"""The spool (files created with O_EXCL on a store without rename, uploaded at their rename or close) and the
copy of a rename the store refuses, under failure and concurrency, on appendonlyfs's s3 and volumes profiles:
a killed upload process, a store that fills up during a re-save, a writer killed at random points, two
processes renaming onto one name or creating one name with O_EXCL, the mode and times of the file, a store
that refuses to unlink an open file, and a spool directory on the store. Before, the writer hung for ever
when its upload process was killed, a failed re-save left a prefix of the new file where the old one was,
concurrent renames mixed their bytes, O_EXCL was exclusive only within a process, files ended 0644 without
their times, and a copied rename reported ENOSYS after replacing its target.
Exits 77 (skip) without FUSE, unless APPENDGUARD_REQUIRE_FUSE=1 (CI).
"""
import os
import random
import signal
import stat
import subprocess
import textwrap
import time

import contextlib

import e2e_support
from e2e_support import PYTHON, aofs, harness, main, read_bytes

OLD = b"old checkpoint " * 4096  # 60 KiB
MIB = 1 << 20

# A re-save as safetensors and torch's writers do it: a sibling temporary file created O_EXCL (0600, as
# tempfile and mkstemp), written, renamed onto the target. argv: the temporary file's directory, the
# target's path, MiB, byte.
RESAVE = textwrap.dedent("""
    import os, sys
    d, target, mib, byte = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
    tmp = os.path.join(d, ".tmp" + os.path.basename(target))
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    block = byte * (1 << 20)
    for _ in range(mib):
        os.write(fd, block)
    print("written", flush=True)
    try:
        os.rename(tmp, target)
        print("rename=0", flush=True)
    except OSError as e:
        print(f"rename={e.errno}", flush=True)
        os.unlink(tmp)
    os.close(fd)
""")


def appendguard_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("appendguard:")]


def upload_children(parent):
    """The pids of the appendguard-up processes whose parent is `parent`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if command_name(entry) == "appendguard-up" and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def no_upload_process_left(timeout=10.0):
    """Waits until no appendguard-up process runs (an upload outliving its killed writer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(command_name(p) == "appendguard-up" for p in os.listdir("/proc") if p.isdigit()):
            return True
        time.sleep(0.02)
    return False


class StoresTest(e2e_support.MountTest):
    @contextlib.contextmanager
    def store(self, profile, options=()):
        """A fresh mount of `profile` for one subtest (self.b and self.m name its files)."""
        with aofs.mounted(e2e_support.AOFS, profile=profile, options=options,
                          log=self.path(f"aofs-{profile}-{len(os.listdir(self.dir))}.log")) as (backing, mnt):
            self.backing, self.mnt = backing, mnt
            e2e_support.ACTIVE_MOUNTS.add(mnt)
            try:
                yield backing, mnt
            finally:
                e2e_support.ACTIVE_MOUNTS.discard(mnt)
        self.mnt = None


class StoreKeepsOldFileTest(StoresTest):
    """appendonlyfs itself, without the library: an O_TRUNC open of an existing file keeps the old contents
    until the upload completes, and an upload that failed leaves them (as S3 replaces an object)."""

    def test_old_contents_until_the_close(self):
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                with self.store(profile) as (backing, mnt):
                    with open(self.b("f"), "wb") as f:
                        f.write(OLD)
                    fd = os.open(self.m("f"), os.O_WRONLY | os.O_TRUNC)
                    os.write(fd, b"new" * 1000)
                    self.assertEqual(os.stat(self.m("f")).st_size, len(OLD), "emptied at the open")
                    os.close(fd)
                    self.assertEqual(read_bytes(self.b("f")), b"new" * 1000)
                    # A failed upload (a write out of order aborts it) leaves the old file.
                    fd = os.open(self.m("f"), os.O_WRONLY | os.O_TRUNC)
                    os.write(fd, b"partial")
                    with self.assertRaises(OSError):
                        os.pwrite(fd, b"x", 100)
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                    time.sleep(0.1)  # the release follows the close
                    self.assertEqual(read_bytes(self.b("f")), b"new" * 1000)
                    self.assertEqual(sorted(os.listdir(backing)), ["f"])


class UploadFailureTest(StoresTest):
    def resave(self, mnt, mib=4, byte="N", **env):
        return subprocess.Popen([PYTHON, "-c", RESAVE, mnt, os.path.join(mnt, "model.bin"), str(mib), byte],
                                env=harness.child_env("1", True, APPENDGUARD_BACKTRACE="0", **env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_a_killed_upload_process_fails_the_rename_with_one_line(self):
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                # ~1.4 s for 8 MiB
                with self.store(profile, options=("delay_us=20000",)) as (backing, mnt):
                    with open(self.b("model.bin"), "wb") as f:
                        f.write(OLD)
                    writer = self.resave(mnt, mib=8)
                    self.assertEqual(writer.stdout.readline().strip(), "written")
                    deadline = time.monotonic() + 10
                    children = []
                    while not children and time.monotonic() < deadline:
                        children = upload_children(writer.pid)
                        time.sleep(0.01)
                    self.assertTrue(children, "no appendguard-up process seen")
                    time.sleep(0.2)  # mid-upload
                    os.kill(children[0], signal.SIGKILL)
                    try:
                        out, err = writer.communicate(timeout=15)
                    except subprocess.TimeoutExpired:
                        writer.kill()
                        out, err = writer.communicate()
                        self.fail(f"the writer hung after its upload process was killed\n{err}")
                    self.assertEqual(writer.returncode, 0, err)
                    self.assertIn("rename=5", out, out + err)  # EIO
                    lines = appendguard_lines(err)
                    self.assertEqual(len(lines), 1, err)
                    self.assertIn("killed by signal 9", lines[0])
                    self.assertIn("keeps the file that was there", lines[0])
                    time.sleep(0.2)
                    self.assertEqual(read_bytes(self.b("model.bin")), OLD, "the old checkpoint was damaged")
                    self.assertEqual(sorted(os.listdir(backing)), ["model.bin"])

    def test_a_resave_onto_a_full_store_keeps_the_old_file(self):
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                with self.store(profile, options=(f"fail_after={MIB}",)) as (backing, mnt):
                    with open(self.b("model.bin"), "wb") as f:
                        f.write(OLD)
                    writer = self.resave(mnt, mib=4)
                    out, err = writer.communicate(timeout=60)
                    self.assertEqual(writer.returncode, 0, err)
                    self.assertIn("rename=28", out, out + err)  # ENOSPC
                    lines = appendguard_lines(err)
                    self.assertEqual(len(lines), 1, err)
                    self.assertIn("the store keeps the file that was there", lines[0])
                    self.assertNotIn("uploaded uploading", lines[0])
                    time.sleep(0.2)
                    self.assertEqual(read_bytes(self.b("model.bin")), OLD, "a failed re-save damaged the old file")
                    self.assertEqual(sorted(os.listdir(backing)), ["model.bin"])

    def test_writer_killed_at_random_points_leaves_old_or_whole_new(self):
        # The done-when figures: 20 kills per store, each at a random point of a 2 MiB re-save.
        new = b"N" * (2 * MIB)
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                with self.store(profile, options=("delay_us=2000",)) as (backing, mnt):
                    counts = {"old": 0, "new": 0, "mix": 0, "hang": 0}
                    rng = random.Random(38)
                    for _ in range(20):
                        with open(self.b("model.bin"), "wb") as f:
                            f.write(OLD)
                        writer = self.resave(mnt, mib=2)
                        time.sleep(rng.uniform(0.0, 0.35))
                        writer.kill()
                        writer.communicate()
                        if not no_upload_process_left():
                            counts["hang"] += 1
                            continue
                        time.sleep(0.05)
                        data = read_bytes(self.b("model.bin"))
                        counts["old" if data == OLD else "new" if data == new else "mix"] += 1
                        for name in os.listdir(backing):
                            if name != "model.bin":
                                os.unlink(os.path.join(backing, name))
                    print(f"{profile}: writer killed at random points, 20 runs: {counts}", flush=True)
                    self.assertEqual(counts["mix"] + counts["hang"], 0, counts)


class ConcurrencyTest(StoresTest):
    def test_two_renames_onto_one_target_never_mix(self):
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                with self.store(profile, options=("delay_us=1000",)) as (backing, mnt):
                    for run in range(3):
                        os.makedirs(os.path.join(backing, f"a{run}"))
                        os.makedirs(os.path.join(backing, f"b{run}"))
                        writers = [subprocess.Popen([PYTHON, "-c", RESAVE, os.path.join(mnt, f"{who}{run}"),
                                                     self.m("model.bin"), "4", who.upper()],
                                                    env=harness.child_env("1", True, APPENDGUARD_BACKTRACE="0"),
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                                   for who in ("a", "b")]
                        outs = [p.communicate(timeout=60) for p in writers]
                        time.sleep(0.1)
                        data = read_bytes(self.b("model.bin"))
                        self.assertIn(data, (b"A" * 4 * MIB, b"B" * 4 * MIB), f"run {run}: bytes mixed")
                        for out, err in outs:
                            if "rename=0" not in out:
                                self.assertEqual(len(appendguard_lines(err)), 1, out + err)
                        os.unlink(self.b("model.bin"))

    def test_o_excl_is_exclusive_across_processes(self):
        backing, mnt = self.mount("s3")
        holder = subprocess.Popen(
            [PYTHON, "-c", "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL, 0o600); "
             "os.write(fd, b'first'); print('open', flush=True); sys.stdin.readline(); os.close(fd)",
             self.m("lock")], env=harness.child_env("1", True), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.assertEqual(holder.stdout.readline().strip(), "open")
        proc = harness.run([PYTHON, "-c", "import os,sys\ntry:\n os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL)"
                            "\n print('created')\nexcept FileExistsError:\n print('EEXIST')", self.m("lock")])
        out, err = holder.communicate("\n", timeout=30)
        self.assertEqual(proc.stdout.strip(), "EEXIST", proc.stdout + proc.stderr)
        self.assertEqual(holder.returncode, 0, err)
        self.assertEqual(read_bytes(self.b("lock")), b"first")

    def test_a_close_that_drops_the_bytes_fails(self):
        backing, mnt = self.mount("s3")
        holder = subprocess.Popen(
            [PYTHON, "-c", "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL, 0o600); "
             "os.write(fd, b'spooled'); print('open', flush=True); sys.stdin.readline()\n"
             "try:\n os.close(fd); print('close=0')\nexcept OSError as e:\n print(f'close={e.errno}')",
             self.m("name")], env=harness.child_env("1", True, APPENDGUARD_BACKTRACE="0"), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(holder.stdout.readline().strip(), "open")
        with open(self.m("name"), "wb") as f:  # another writer, without the library, by O_TRUNC
            f.write(b"other")
        out, err = holder.communicate("\n", timeout=30)
        self.assertIn("close=17", out, out + err)  # EEXIST
        self.assertEqual(len(appendguard_lines(err)), 1, err)
        self.assertEqual(read_bytes(self.b("name")), b"other")


class ModesAndTimesTest(StoresTest):
    def test_spooled_and_copied_files_keep_mode_and_times(self):
        script = textwrap.dedent("""
            import os, sys
            d = sys.argv[1]
            os.umask(0o022)
            # spooled (O_EXCL 0600, as mkstemp), renamed
            fd = os.open(os.path.join(d, ".tmpa"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"a"); os.rename(os.path.join(d, ".tmpa"), os.path.join(d, "a")); os.close(fd)
            # spooled, its mode and times set on the descriptor, closed under its own name
            fd = os.open(os.path.join(d, "b"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.write(fd, b"b"); os.fchmod(fd, 0o750); os.utime(fd, (1000000000, 1000000000)); os.close(fd)
            # written on the store (no O_EXCL), its time set by name, renamed: copied on the store
            fd = os.open(os.path.join(d, "c.tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b"c"); os.close(fd)
            os.utime(os.path.join(d, "c.tmp"), (1200000000, 1200000000))
            os.rename(os.path.join(d, "c.tmp"), os.path.join(d, "c"))
        """)
        for profile in ("s3", "volumes"):
            with self.subTest(profile=profile):
                with self.store(profile) as (backing, mnt):
                    proc = harness.run([PYTHON, "-c", script, mnt])
                    self.assertOk(proc)
                    modes = {n: stat.S_IMODE(os.stat(self.b(n)).st_mode) for n in ("a", "b", "c")}
                    self.assertEqual(modes, {"a": 0o600, "b": 0o750, "c": 0o600})
                    self.assertEqual(int(os.stat(self.b("b")).st_mtime), 1000000000)
                    self.assertEqual(int(os.stat(self.b("c")).st_mtime), 1200000000)


class StoreRefusingUnlinkOfOpenFileTest(e2e_support.MountTest):
    def test_the_copy_closes_its_descriptor_before_the_unlink(self):
        # libfuse's high-level API renames an open file's unlink to .fuse_hiddenN, which a store without
        # rename refuses: the copy's own read descriptor must be closed first.
        backing, mnt = self.mount("s3", options=("unlink_open=rename",))
        script = ("import os,sys; d=sys.argv[1]; f=open(os.path.join(d,'m.tmp'),'wb'); f.write(b'meta'); "
                  "f.close(); os.rename(os.path.join(d,'m.tmp'), os.path.join(d,'m')); print('rename=0')")
        proc = harness.run([PYTHON, "-c", script, mnt], APPENDGUARD_BACKTRACE="0")
        self.assertOk(proc)
        self.assertEqual(appendguard_lines(proc.stderr), [], proc.stderr)
        self.assertEqual(sorted(os.listdir(backing)), ["m"])
        self.assertEqual(read_bytes(self.b("m")), b"meta")


class SpoolDirectoryTest(e2e_support.MountTest):
    def test_a_spool_on_the_store_is_refused_at_start(self):
        backing, mnt = self.mount("s3")
        os.mkdir(self.m("spool"))
        proc = harness.run(["true"], APPENDGUARD_SPOOL=self.m("spool"))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("APPENDGUARD_SPOOL=" + self.m("spool"), lines[0])

    def test_a_missing_spool_is_said_missing(self):
        backing, mnt = self.mount("s3")
        script = ("import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_EXCL, 0o644); "
                  "os.write(fd, b'x'); os.close(fd)")
        proc = harness.run([PYTHON, "-c", script, self.m("x")], APPENDGUARD_SPOOL=self.path("nowhere"),
                           APPENDGUARD_BACKTRACE="0")
        self.assertOk(proc)
        lines = appendguard_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("does not exist", lines[0])
        self.assertNotIn("64 MiB", lines[0])
        self.assertEqual(read_bytes(self.b("x")), b"x")


if __name__ == "__main__":
    main()
