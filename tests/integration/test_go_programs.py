"""Dynamically linked Go programs under the library: their runtime makes its file I/O by system calls of
its own, which APPENDGUARD_SYSCALLS=always guards (and auto says, once, at start-up that it does not). A
cgo-linked probe is built here with Debian's golang-go (tests/integration/programs/go_probe), and rclone
(Debian's, a cgo-linked Go program) runs under `always`."""
import filecmp
import os
import re
import shutil
import subprocess
import unittest

from harness import TempDirTest, child_env, read_bytes, results, run
from test_raw_syscalls import layer_available

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "go_probe")
BIN = os.environ.get("APPENDGUARD_TEST_BIN", "")
GO_NOTICE = ("appendguard: a Go program: its file I/O is made by system calls of its own, outside libc, which "
             "APPENDGUARD_SYSCALLS=auto does not guard; APPENDGUARD_SYSCALLS=always guards them")


def build_probe(cgo=True):
    """The Go probe, built once per build tree (go's cache under it); None without a Go toolchain. Without
    cgo the Go toolchain links it statically."""
    go = shutil.which("go")
    if not go:
        return None
    out = os.path.join(BIN, "go_probe" if cgo else "go_probe_static")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    env.update(GOCACHE=os.path.join(BIN, "go-cache"), GOPATH=os.path.join(BIN, "go-path"),
               CGO_ENABLED="1" if cgo else "0", GOFLAGS="-mod=mod", GO111MODULE="on", GOTOOLCHAIN="local")
    subprocess.run([go, "build", "-o", out, "."], cwd=SOURCE, env=env, check=True, timeout=600,
                   capture_output=True)
    return out


class GoProgramsTest(TempDirTest):
    probe_path = None

    @classmethod
    def setUpClass(cls):
        cls.probe_path = build_probe()

    def setUp(self):
        super().setUp()
        if not layer_available():
            self.skipTest("Syscall User Dispatch needs Linux 5.11+")
        if not self.probe_path:
            self.fail("no Go toolchain: install golang-go (scripts/lib/common.sh lists it)")

    def go(self, case, **variables):
        variables.setdefault("APPENDGUARD_PATHS", os.path.join(self.dir, "**"))
        variables.setdefault("APPENDGUARD_BACKTRACE", "0")
        return run([self.probe_path, case, self.dir], timeout=60, **variables)

    def test_goroutine_preemption_under_always(self):
        # Before: killed by SIGSYS (exit -31) at the first SIGURG (Go's handlers block every signal).
        proc = self.go("preempt", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(results(proc.stdout)["preempt_ok"], "1")

    def test_children_and_their_sigchld_under_always(self):
        # Before: killed by SIGSYS (exit -31).
        proc = self.go("child", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(results(proc.stdout)["child_ok"], "1")

    def test_always_guards_a_go_write_at_0_and_auto_says_it_does_not(self):
        target = os.path.join(self.dir, "g.log")
        proc = self.go("writeat", APPENDGUARD_SYSCALLS="always")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(results(proc.stdout)["writeat_err"], "true")  # refused
        self.assertEqual(read_bytes(target), b"0123456789")
        self.assertNotIn(GO_NOTICE, proc.stderr)
        os.unlink(target)
        proc = self.go("writeat")  # auto
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        # Before: nothing was said, and the write landed.
        self.assertEqual(re.findall(r"^appendguard: a Go program.*$", proc.stderr, re.M), [GO_NOTICE], proc.stderr)
        self.assertEqual(read_bytes(target), b"XX23456789")  # unguarded, as the line says

    def test_doctor_and_run_say_what_each_setting_does_for_static_and_dynamic_go(self):
        # Before: both said "a Go program: NOT covered ... not through libc", whatever the setting.
        launcher = os.environ.get("APPENDGUARD_LAUNCHER", "")
        self.assertTrue(launcher, "APPENDGUARD_LAUNCHER is not set; run through ctest")
        static = build_probe(cgo=False)
        env = child_env(mode=None, preload=False)
        doctor = subprocess.run([launcher, "doctor", self.probe_path], env=env, capture_output=True, text=True,
                                timeout=120).stdout
        self.assertIn(": a dynamically linked Go program: covered only with APPENDGUARD_SYSCALLS=always", doctor)
        doctor = subprocess.run([launcher, "doctor", static], env=env, capture_output=True, text=True,
                                timeout=120).stdout
        self.assertIn(": a statically linked Go program: NOT covered (LD_PRELOAD has no effect on it", doctor)
        for setting, warned in (("auto", True), ("always", False)):
            env = child_env(mode=None, preload=False, APPENDGUARD_SYSCALLS=setting)
            proc = subprocess.run([launcher, "run", "--", self.probe_path, "preempt", self.dir], env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            self.assertEqual("a dynamically linked Go program" in proc.stderr, warned, proc.stderr)
        env = child_env(mode=None, preload=False, APPENDGUARD_SYSCALLS="always")
        proc = subprocess.run([launcher, "run", "--", static, "preempt", self.dir], env=env, capture_output=True,
                              text=True, timeout=120)
        self.assertIn("a statically linked Go program: NOT covered", proc.stderr)

    def test_a_c_program_gets_no_go_line(self):
        proc = run(["/bin/true"], APPENDGUARD_PATHS=os.path.join(self.dir, "**"))
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))

    def test_rclone_copies_a_folder_under_always(self):
        rclone = shutil.which("rclone")
        if not rclone:
            self.fail("rclone is not installed (scripts/lib/common.sh lists it)")
        source = os.path.join(self.dir, "source")
        os.makedirs(os.path.join(source, "sub"))
        for i in range(5):
            with open(os.path.join(source, "sub" if i % 2 else "", f"part{i}.bin"), "wb") as f:
                f.write(os.urandom(100_000 + i))
        for attempt in range(5):  # before: 30 of 30 runs killed by SIGSYS at start-up
            dest = os.path.join(self.dir, f"dest{attempt}")
            proc = run([rclone, "copy", source, dest], timeout=120, APPENDGUARD_SYSCALLS="always",
                       APPENDGUARD_PATHS=os.path.join(dest, "**"), APPENDGUARD_BACKTRACE="0",
                       RCLONE_CONFIG="/dev/null")
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            comparison = filecmp.dircmp(source, dest)
            self.assertEqual((comparison.left_only, comparison.right_only, comparison.diff_files), ([], [], []))
            self.assertEqual(filecmp.cmpfiles(os.path.join(source, "sub"), os.path.join(dest, "sub"),
                                              os.listdir(os.path.join(source, "sub")), shallow=False)[1:],
                             ([], []))
