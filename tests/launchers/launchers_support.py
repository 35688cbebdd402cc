"""Shared by the launchers tests: each runs a recipe of docs/launching.md as written (read from the page),
with only these substitutions, each of which must occur in the recipe:
  /shared/logs                      -> a fresh log folder of the test
  /mnt/hdfs/run42                   -> run42 on a fresh appendonlyfs mount with the hdfs profile
  /usr/local/lib/libappendguard.so  -> the library under test
  worker counts (16, 8, 4 nodes)    -> 2 workers on this one machine, per test
`python`, `appendguard`, `torchrun`, `accelerate`, `deepspeed` are found in PATH (the launcher under test
first, then the client interpreter's folder), and train.py (this folder's worker) is in the working
directory. A recipe's 2 ranks must write the same files as train.py run without any launcher or library
on a local folder, byte for byte, leave one APPENDGUARD_LOG file per rank named by its rank (%r), and
`appendguard report` must group their two refused writes into one group with ranks 0 and 1.

Every process a test starts carries AG_LAUNCHERS_RUN=<id> in its environment; after each test the
processes still carrying it (a daemon, an orphaned worker) are killed and the test fails naming them.
Without a launcher or the client interpreter the tests skip (77), or fail under
APPENDGUARD_REQUIRE_REAL_CLIENTS=1 or APPENDGUARD_REQUIRE_FUSE=1 (CI)."""
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from e2e_support import MountTest, files_of
from e2e_support import main as e2e_main

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")
PAGE = os.environ.get("APPENDGUARD_LAUNCHING_MD", "")
LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")
LIB = os.environ.get("APPENDGUARD_LIB", "")
CLIENT_PYTHON = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
SKIP_RETURN_CODE = 77
MARKER = "AG_LAUNCHERS_RUN"
DOC_LOGS = "/shared/logs"
DOC_ROOT = "/mnt/hdfs/run42"
DOC_LIB = "/usr/local/lib/libappendguard.so"
# dcp.save's shard headers list their metadata in set order: the same hash seed everywhere makes the bytes
# of every run comparable.
HASH_SEED = "0"


def required():
    return "1" in (os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS"), os.environ.get("APPENDGUARD_REQUIRE_FUSE"))


def client_bin():
    return os.path.dirname(CLIENT_PYTHON) if CLIENT_PYTHON else ""


def skip_or_fail(problem):
    if required():
        print(f"FAIL: {problem}, and APPENDGUARD_REQUIRE_REAL_CLIENTS=1 or APPENDGUARD_REQUIRE_FUSE=1",
              file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: launchers test: {problem} (scripts/test installs the Debian packages and the Python "
          "packages of scripts/lib/common.sh)")
    sys.exit(SKIP_RETURN_CODE)


def require(programs=(), modules=()):
    """Skips (or fails, when required) unless the client interpreter imports torch and `modules` and the
    `programs` are installed (in PATH or beside the client interpreter)."""
    if not CLIENT_PYTHON or not os.access(CLIENT_PYTHON, os.X_OK):
        skip_or_fail(f"APPENDGUARD_CLIENT_PYTHON={CLIENT_PYTHON!r} is not an interpreter")
    path = os.pathsep.join([client_bin(), os.environ.get("PATH", "")])
    missing = [p for p in programs if not shutil.which(p, path=path)]
    if missing:
        skip_or_fail(f"{', '.join(missing)} not installed")
    probe = subprocess.run([CLIENT_PYTHON, "-c", f"import {', '.join(('torch',) + tuple(modules))}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        skip_or_fail(f"{CLIENT_PYTHON} cannot import torch {' '.join(modules)} ({last})")


def page_text():
    with open(PAGE) as f:
        return f.read()


def sections():
    """[(heading, text)] of the page's `## ` sections."""
    out = []
    for part in re.split(r"^## ", page_text(), flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        out.append((heading.strip(), body))
    return out


def blocks(body):
    """The fenced code blocks of a section: [(language, text)]."""
    return re.findall(r"^```(\w*)\n(.*?)^```", body, re.S | re.M)


def recipe(heading, index=0):
    """The index-th code block of the section `## heading`."""
    for name, body in sections():
        if name == heading:
            found = blocks(body)
            if index < len(found):
                return found[index][1]
    raise AssertionError(f"docs/launching.md has no code block {index} under '## {heading}'")


def substitute(text, replacements):
    """text with each (old, new) replaced; every old must occur (the page and the test must agree)."""
    for old, new in replacements:
        if old not in text and old != DOC_LIB:  # the library's path only where a recipe names it
            raise AssertionError(f"the recipe no longer contains {old!r}:\n{text}")
        text = text.replace(old, new)
    return text


def comparable(files):
    """{path: bytes} with each dcp shard's header re-serialized with sorted keys: safetensors writes a
    shard's metadata map in a random order per process (a Rust HashMap), so shards of two identical runs
    differ in that order only. Every other file (the consolidated model files, the index) stays as written:
    those are compared byte for byte."""
    out = {}
    for name, data in files.items():
        if "/sharded/" in name and name.endswith(".safetensors") and len(data) >= 8:
            size = struct.unpack("<Q", data[:8])[0]
            header = json.loads(data[8:8 + size])
            if isinstance(header.get("__metadata__", {}).get("DCP_SHARDING_INFO"), str):
                header["__metadata__"]["DCP_SHARDING_INFO"] = json.loads(header["__metadata__"]["DCP_SHARDING_INFO"])
            data = json.dumps(header, sort_keys=True).encode() + b"\n" + data[8 + size:]
        out[name] = data
    return out


# The marker's value: this build's key (its temporary folder), then one id per test or cluster, so that
# no_process_left.py finds what a killed test of this build left, and nothing of another build's.
BUILD_KEY = hashlib.sha256(os.environ.get("APPENDGUARD_E2E_TMP", "").encode()).hexdigest()[:12]


def new_run_id():
    return f"{BUILD_KEY}:{uuid.uuid4().hex}"


def marked_processes(run_id):
    """[(pid, command line)] of the processes whose environment holds AG_LAUNCHERS_RUN=run_id (with
    run_id ending in ':', every id that starts with it)."""
    needle = f"{MARKER}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                entries = f.read().split(b"\0")
            if not any(e == needle or (needle.endswith(b":") and e.startswith(needle)) for e in entries):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found.append((int(entry), f.read().replace(b"\0", b" ").decode(errors="replace").strip()))
        except OSError:
            continue
    return [(pid, cmd) for pid, cmd in found if cmd]  # zombies have no command line


def kill_marked(run_id, grace=10.0):
    """Waits up to `grace` seconds for the marked processes to end, then kills them (SIGTERM, SIGKILL).
    Returns those that were still running after the grace period."""
    deadline = time.monotonic() + grace
    left = marked_processes(run_id)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(run_id)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in marked_processes(run_id):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        time.sleep(0.5)
    return left


class LauncherTest(MountTest):
    """A fresh hdfs mount, a working folder with train.py, a log folder, and the checks of a 2-rank run."""

    reference_files = None  # train.py's two ranks on a local folder, computed once per test process
    profile = "hdfs"

    def setUp(self):
        super().setUp()
        self.run_id = new_run_id()
        self.addCleanup(self.no_process_left)
        self.mount(self.profile)
        self.work = self.path("work")
        self.logs = self.path("logs")
        self.bin = self.path("bin")
        self.tmp = self.path("tmp")  # torchrun's agent leaves a torchelastic_* folder there
        for d in (self.work, self.logs, self.bin, self.tmp):
            os.makedirs(d)
        shutil.copy(TRAIN, self.work)
        os.symlink(LAUNCHER, os.path.join(self.bin, "appendguard"))
        self.root = self.m("run42")
        self.started = time.monotonic()

    def no_process_left(self):
        left = kill_marked(self.run_id)
        self.assertEqual(left, [], "processes of the test were still running after it (killed now)")

    def environment(self, **extra):
        """The recipe's environment: ours without the library's variables, PATH with the launcher under
        test and the client interpreter's folder first, the marker, and `extra`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
        env.update(PATH=os.pathsep.join([self.bin, client_bin(), env.get("PATH", "/usr/bin:/bin")]),
                   HF_HOME=self.path("hf"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                   HOME=self.work, PYTHONHASHSEED=HASH_SEED, TMPDIR=self.tmp)
        env[MARKER] = self.run_id
        env.update(extra)
        return env

    def doc_replacements(self, *extra):
        return [(DOC_LOGS, self.logs), (DOC_ROOT, self.root), (DOC_LIB, LIB), *extra]

    def run_recipe(self, text, timeout=240, ranks=None, copies=1, **env):
        """Runs the recipe (shell text) with bash -e in the working folder, in its own process group, which
        is killed at the end whatever happens. With ranks, one run per rank at once, each with RANK set
        (recipes without a launcher); with copies, that many runs at once (one per "node").
        Returns a CompletedProcess (outputs joined, the worst status)."""
        script = os.path.join(self.work, f"recipe-{len(os.listdir(self.work))}.sh")
        with open(script, "w") as f:
            f.write(text)
        print(f"--- running:\n{text}", flush=True)
        started = time.monotonic()
        procs = [subprocess.Popen(["bash", "-e", script], cwd=self.work,
                                  env=self.environment(**env) if r is None else self.environment(RANK=str(r), **env),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
                 for r in (ranks or [None] * copies)]
        outs, errs, codes = [], [], []
        try:
            for proc in procs:
                try:
                    out, err = proc.communicate(timeout=max(1, timeout - (time.monotonic() - started)))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate()
                    self.fail(f"the recipe did not finish in {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
                outs.append(out)
                errs.append(err)
                codes.append(proc.returncode)
        finally:
            for proc in procs:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        print(f"--- took {time.monotonic() - started:.1f} s", flush=True)
        return subprocess.CompletedProcess(script, max(codes, key=abs), "".join(outs), "".join(errs))

    @classmethod
    def reference(cls):
        """{path: bytes} that train.py's ranks 0 and 1 write on a local folder, with no launcher or library.
        Computed once and kept in the temporary folder (keyed by train.py's and the interpreter's identity),
        so that the launchers tests share one reference run."""
        if cls.reference_files is None:
            with open(TRAIN, "rb") as f:
                key = hashlib.sha256(f.read() + CLIENT_PYTHON.encode() + HASH_SEED.encode()).hexdigest()[:16]
            kept = os.path.join(tempfile.gettempdir(), f"launchers-reference-{key}")
            if not os.path.isdir(kept):
                out = tempfile.mkdtemp(prefix="launchers-reference-")
                env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
                env["PYTHONHASHSEED"] = HASH_SEED
                procs = [subprocess.Popen([CLIENT_PYTHON, TRAIN, "--save-dir", out], env=dict(env, RANK=str(r)),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                         for r in (0, 1)]
                for p in procs:
                    stdout, stderr = p.communicate(timeout=300)
                    if p.returncode != 0:
                        shutil.rmtree(out, True)
                        raise AssertionError(f"the local reference run failed:\n{stdout}\n{stderr}")
                try:
                    os.rename(out, kept)  # atomic: another test may have kept its own meanwhile
                except OSError:
                    shutil.rmtree(out, True)
            LauncherTest.reference_files = files_of(kept)
        return LauncherTest.reference_files

    def check_ranks(self, proc, backing_root=None, logs=True, summary=True):
        """The checks every recipe's run must pass (see the module's docstring); logs=False for a recipe
        without APPENDGUARD_LOG (its reports are on stderr)."""
        self.assertOk(proc)
        output = proc.stdout + proc.stderr
        for r in (0, 1):
            self.assertRegex(output, rf"ok: rank {r} saved .* the write at 0 was refused \((EOPNOTSUPP|ENOTSUP)\)")
        written = files_of(backing_root or self.b("run42"))
        expected = self.reference()
        for r in (0, 1):
            self.assertEqual(written.pop(f"rank{r}/wrong.safetensors"), b"abcdefgh")
            self.assertNotEqual(expected[f"rank{r}/wrong.safetensors"], b"abcdefgh")  # written without the library
        expected = {k: v for k, v in expected.items() if not k.endswith("wrong.safetensors")}
        self.assertTreesEqual(comparable(written), comparable(expected))
        self.assertTrue(any("-of-00002.safetensors" in name for name in written), sorted(written))
        self.assertEqual(self.refused_writes(), [], "the mount refused a write that reached it")
        if logs:
            self.check_logs(self.logs, summary)
        else:
            self.assertEqual(len([line for line in proc.stderr.splitlines()
                                  if line.startswith("appendguard: violation:")]), 2, proc.stderr)

    def check_logs(self, logs, summary=True):
        names = sorted(os.listdir(logs))
        ranks = []
        for name in names:
            match = re.fullmatch(r"appendguard-.+-(\d+)-(\d+)\.log", name)
            self.assertIsNotNone(match, f"unexpected file in the log folder: {name} (all: {names})")
            ranks.append(match.group(1))
            with open(os.path.join(logs, name)) as f:
                text = f.read()
            self.assertIn("appendguard: violation:", text, name)
            if summary:
                self.assertIn("appendguard: summary:", text, name)
        self.assertEqual(sorted(ranks), ["0", "1"], f"one log per rank expected: {names}")
        paths = [os.path.join(logs, n) for n in names]
        report = subprocess.run([LAUNCHER, "report", "--json", *paths], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(report.returncode, 1, report.stderr)
        summary = json.loads(report.stdout)
        self.assertEqual((summary["violations"], summary["logs"]), (2, 2), summary)
        counted = [g for g in summary["groups"] if not g["fixed_by_enforce"]]
        self.assertEqual(len(counted), 1, summary)
        self.assertEqual(counted[0]["ranks"], ["0", "1"], summary)
        self.assertIn("train.py", counted[0]["site"], summary)
        text = subprocess.run([LAUNCHER, "report", *paths], stdout=subprocess.PIPE, text=True, timeout=60).stdout
        print(text, flush=True)

    def tearDown(self):
        print(f"--- {self.id()}: {time.monotonic() - self.started:.1f} s", flush=True)
        super().tearDown()


def main(programs=(), modules=()):
    if not PAGE or not os.path.exists(PAGE):
        print("FAIL: APPENDGUARD_LAUNCHING_MD is not docs/launching.md; run through ctest", file=sys.stderr)
        sys.exit(1)
    require(programs, modules)
    e2e_main()
