"""Saves that publish a file by renaming a temporary one, on a store without rename (issue 26): appendonlyfs
profile=s3 (mountpoint-s3's rules: rename ENOSYS, an existing file rewritten only with O_TRUNC) and
profile=volumes (Databricks volumes' rules: rename ENOSYS, appends and preallocation EOPNOTSUPP).
safetensors 0.8 save_file (open O_EXCL, ftruncate, sequential writes, a raw renameat while open), and what
inherits it (transformers save_pretrained, huggingface_hub save_torch_state_dict, accelerate save_state),
and dcp.save's default FileSystemWriter (.metadata.tmp closed, then os.rename) then dcp.load.

Without the library each fails as users report (os error 38 from safetensors' rename; DCP's fsync of
.metadata.tmp ends the upload before its bytes are written, so the write at its close fails EIO). With APPENDGUARD=1 alone every save works, twice onto the same names, byte-identical to a local
run (DCP's .metadata holds a random save id: loaded back, not compared), with no temporary file left on
the store nor in the spool ($TMPDIR). A writer killed at random moments never leaves a partial file under
the final name; a spool without room is said in one line and nothing is lost."""
import ctypes
import os
import random
import signal
import subprocess
import time

from e2e_support import PYTHON, files_of, violations
from realclients_support import CLIENT_PYTHON, ClientTest, client, main

FAMILY = ["save_file", "save_pretrained", "hub_save", "accelerate_save", "dcp_default"]
TWICE = ",".join(f"{name}_twice" for name in FAMILY)
PR_SET_CHILD_SUBREAPER = 36


def comparable(tree):
    """DCP's .metadata holds a random save id: its presence is compared, not its bytes (dcp.load checks it)."""
    return {name: (b"" if os.path.basename(name) == ".metadata" else data) for name, data in tree.items()}


def temporary_names(tree):
    return sorted(name for name in tree if os.path.basename(name).startswith(".tmp") or name.endswith(".tmp"))


def spool_leftovers(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith("appendguard-spool-"))


class NoRenameTest(ClientTest):
    def test_without_the_library_each_save_fails_as_users_report(self):
        self.mount("s3")
        failed = self.failures_without_the_library()
        # safetensors' raw rename of its temporary file (safetensors#792: os error 38; its preallocation
        # passes, as mountpoint-s3 accepts a truncate of a file being written without applying it).
        for name in FAMILY[:4]:
            self.assertIn("I/O error: Function not implemented (os error 38)", failed[name])
        # DCP's os.fsync of .metadata.tmp ends the upload before Python's buffer is written: the write at
        # its close fails EIO (mountpoint-s3: "upload already completed"), before its rename is tried.
        self.assertIn("[Errno 5] Input/output error", failed["dcp_default"])

    def test_without_the_library_each_save_fails_on_databricks_volumes_rules(self):
        self.mount("volumes")
        failed = self.failures_without_the_library()
        for name in FAMILY[:4]:  # safetensors' preallocation (set_len): Errno 95, as NeMo Automodel#995 reports
            self.assertIn("I/O error: Operation not supported (os error 95)", failed[name])
        self.assertIn("[Errno 38] Function not implemented", failed["dcp_default"])  # DCP's os.rename
        self.assertIn(".metadata.tmp", failed["dcp_default"])

    def failures_without_the_library(self):
        proc = self.run_plain(client("try_each", self.m("out"), ",".join(FAMILY)), timeout=300)
        failed = {line.split(":")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("failed:")}
        self.assertEqual(sorted(failed), sorted(FAMILY), proc.stdout + proc.stderr[-3000:])
        return failed

    def test_each_save_twice_with_the_library_alone_is_identical_to_a_local_run(self):
        self.check_each_save_twice("s3")

    def test_each_save_twice_on_databricks_volumes_rules_is_identical_to_a_local_run(self):
        self.check_each_save_twice("volumes")

    def check_each_save_twice(self, profile):
        self.mount(profile)
        before = spool_leftovers(os.environ["TMPDIR"])
        proc = self.run_lib(client("several", self.m("out"), TWICE), timeout=300)
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        self.assertEqual([line for line in proc.stderr.splitlines() if line.startswith("appendguard:")], [],
                         "nothing to say: every rename was carried out")
        oks = [line for line in proc.stdout.splitlines() if line.startswith("ok:")]
        self.assertEqual(len(oks), 2 * len(FAMILY), proc.stdout)
        stored = files_of(self.b("out"))
        self.assertEqual(temporary_names(stored), [], "a temporary name remained on the store")
        self.assertTreesEqual(comparable(stored), comparable(self.reference("several", TWICE)))
        self.assertEqual(spool_leftovers(os.environ["TMPDIR"]), before, "a spool file remained")
        # The store saw DCP's own renames of .metadata.tmp (refused) and nothing else refused.
        refused = [line for line in self.log_lines() if line.startswith("refused ")]
        self.assertEqual(len(refused), 2, self.log_lines())
        self.assertTrue(all(line.startswith("refused rename path=/out/dcp_default_twice/.metadata.tmp")
                            for line in refused), refused)

    def test_a_spooled_file_is_uploaded_once_and_leaves_nothing_in_the_spool(self):
        self.mount("s3")
        spool = self.path("spool")
        os.mkdir(spool)
        proc = self.run_lib(client("save_file", self.m("out")), APPENDGUARD_SPOOL=spool, APPENDGUARD_TRACE="1")
        self.assertOk(proc)
        lines = proc.stderr.splitlines()
        opens = [line for line in lines if "/out/.tmp" in line and "(spooled: uploaded at its rename or close)" in line]
        self.assertEqual(len(opens), 1, proc.stderr[-3000:])
        uploads = [line for line in lines if " rename " in line and "renamed to " in line]
        self.assertEqual(len(uploads), 1, proc.stderr[-3000:])
        self.assertIn("/out/model.safetensors: 62800 bytes written sequentially", uploads[0])
        self.assertEqual(os.listdir(spool), [])
        self.assertTreesEqual(files_of(self.b("out")), self.reference("save_file"))

    def test_a_writer_killed_at_random_moments_never_leaves_a_partial_file_under_the_final_name(self):
        # The test is the subreaper of the library's upload process, which outlives the killed writer.
        libc = ctypes.CDLL(None, use_errno=True)
        self.assertEqual(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0)
        self.addCleanup(libc.prctl, PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        self.mount("s3")
        expected = files_of(self.reference_dir("save_big"))["model.safetensors"]
        rng = random.Random(26)
        outcomes = {"none": 0, "whole": 0}
        for round_number in range(10):
            out = self.m(f"kill{round_number}")
            os.mkdir(out)
            env = dict(os.environ, LD_PRELOAD=os.environ["APPENDGUARD_LIB"], APPENDGUARD="1")
            env.pop("APPENDGUARD_TRACE", None)
            writer = subprocess.Popen(client("save_big", out), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
            self.assertEqual(writer.stdout.readline().strip(), "saving")
            time.sleep(rng.uniform(0.0, 0.6))
            writer.send_signal(signal.SIGKILL)
            writer.wait()
            writer.stdout.close()
            self.reap_uploaders()
            stored = files_of(self.b(f"kill{round_number}"))
            # Only the empty placeholder that keeps O_EXCL exclusive on the store (a killed writer leaves its
            # temporary file, as without the library, but empty): never a byte under a temporary name.
            self.assertEqual({stored[name] for name in temporary_names(stored)} - {b""}, set(),
                             "a temporary name reached the store with bytes")
            data = stored.get("model.safetensors")
            if data is None:
                outcomes["none"] += 1
            else:
                self.assertEqual(len(data), len(expected), f"round {round_number}: a partial file")
                self.assertTrue(data == expected, f"round {round_number}: other bytes")
                outcomes["whole"] += 1
        print(f"10 kills during save_file of 48 MiB: {outcomes}")

    def reap_uploaders(self):
        """Waits for the orphaned upload processes (named appendguard-up) re-parented to this test."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            children = []
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    with open(f"/proc/{pid}/comm") as f:
                        comm = f.read().strip()
                except OSError:
                    continue
                if int(fields[1]) == os.getpid() and comm == "appendguard-up":
                    children.append(int(pid))
            if not children:
                return
            for pid in children:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.fail("an upload process did not finish within 60 s")

    def test_python_temporary_files_renamed_on_a_store_without_rename(self):
        # tempfile.NamedTemporaryFile opens O_EXCL (spooled). Written through its descriptor and closed
        # before os.replace: uploaded at the close, then copied at the rename. Written by name instead
        # (another open of f.name: a new file on the store) and closed: the spool is not the file then,
        # and the rename copies what the store has.
        self.mount("s3")
        code = ("import os, sys, tempfile\n"
                "d = sys.argv[1]\n"
                "f = tempfile.NamedTemporaryFile(dir=d, delete=False)\n"
                "f.write(b'through the descriptor'); f.close()\n"
                "os.replace(f.name, os.path.join(d, 'first'))\n"
                "f = tempfile.NamedTemporaryFile(dir=d, delete=False)\n"
                "with open(f.name, 'wb') as g: g.write(b'by name')\n"
                "f.close()\n"
                "os.replace(f.name, os.path.join(d, 'second'))\n"
                "print('ok')\n")
        proc = self.run_lib([PYTHON, "-c", code, self.mnt])
        self.assertOk(proc)
        self.assertEqual(proc.stdout.split(), ["ok"])
        self.assertEqual([line for line in proc.stderr.splitlines() if line.startswith("appendguard:")], [])
        self.assertEqual(files_of(self.backing), {"first": b"through the descriptor", "second": b"by name"})

    def test_a_spool_without_room_is_said_and_nothing_is_lost(self):
        self.mount("s3")
        tiny = self.path("tiny")
        os.mkdir(tiny)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", tiny], check=False)
        # At the open: less than the spool's 64 MiB reserve, so the file is written on the store and copied
        # at the rename; the save works.
        proc = self.run_lib(client("save_file", self.m("out")), APPENDGUARD_SPOOL=tiny)
        self.assertOk(proc)
        said = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn(f"APPENDGUARD_SPOOL={tiny}", said[0])
        self.assertIn("has less than 64 MiB free", said[0])
        self.assertTreesEqual(files_of(self.b("out")), self.reference("save_file"))
        # At the preallocation: room for the reserve but not for the file: ENOSPC before anything reaches the
        # store, one line, and the file saved before is intact.
        medium = self.path("medium")
        os.mkdir(medium)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", medium], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", medium], check=False)
        before = files_of(self.b("out"))
        big = self.run_lib(client("save_big", self.m("out"), "32"), APPENDGUARD_SPOOL=medium)
        self.assertFails(big, 1)
        self.assertIn("No space left on device (os error 28)", big.stderr)
        said = [line for line in big.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(said), 1, big.stderr)
        self.assertIn("APPENDGUARD_SPOOL=off", said[0])
        self.assertEqual(files_of(self.b("out")), before)
        self.assertEqual(os.listdir(medium), [])
        # During the writes (no preallocation to tell the size): the write fails ENOSPC, one line names the
        # setting, and nothing reaches the store.
        code = ("import os, sys, tempfile\n"
                "f = tempfile.NamedTemporaryFile(dir=sys.argv[1], delete=False)\n"
                "try:\n"
                "    for _ in range(12): f.write(b'x' * (8 << 20)); f.flush()\n"
                "except OSError as e:\n"
                "    print('write=%d' % e.errno)\n")
        small = self.path("small")
        os.mkdir(small)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=66m", "tmpfs", small], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", small], check=False)
        os.mkdir(self.m("full"))
        proc = self.run_lib([PYTHON, "-c", code, self.m("full")], APPENDGUARD_SPOOL=small)
        self.assertIn("write=28", proc.stdout.split(), proc.stderr)
        said = [line for line in proc.stderr.splitlines() if line.startswith("appendguard:")]
        self.assertEqual(len(said), 1, proc.stderr)
        self.assertIn(f"the spool (APPENDGUARD_SPOOL={small}) is full", said[0])


if __name__ == "__main__":
    assert CLIENT_PYTHON is not None
    main()
