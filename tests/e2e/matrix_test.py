"""e2e.matrix: the conformance matrix of issue 23 (see matrix.py for the classes and the rule).

Mounts each store of matrix_stores.STORES once, runs every operation of matrix_ops.OPERATIONS there without
the library and with `APPENDGUARD=1` alone (one process per store and mode: torch is imported once), and
on a local disk for the reference; then:
  test_rule          every cell with the library obeys the rule (the failure lists each breaking cell)
  test_docs_table    docs/stores.md's generated section is what this run measured
                     (APPENDGUARD_MATRIX_WRITE_DOC=1 rewrites it instead)
  test_doctor_advice `appendguard doctor DIR` on each store agrees with the matrix

The results are also written to MATRIX_RESULTS (default: matrix-results.json beside the e2e temporary
directory). Needs APPENDGUARD_CLIENT_PYTHON (torch, safetensors, transformers, numpy, moto[server]); a
missing tool or store skips (exit 77) unless APPENDGUARD_REQUIRE_FUSE=1 or
APPENDGUARD_REQUIRE_REAL_CLIENTS=1, where it fails.
"""
import concurrent.futures
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import e2e_support
import matrix
import matrix_ops
import matrix_stores
from e2e_support import harness

CLIENT = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")
WORKER = os.path.join(e2e_support.HERE, "matrix_ops.py")
DOC = os.path.join(e2e_support.ROOT, "..", "docs", "stores.md")
TMP = os.environ.get("APPENDGUARD_E2E_TMP", tempfile.gettempdir())
RESULTS = os.environ.get("MATRIX_RESULTS", os.path.join(os.path.dirname(TMP), "matrix-results.json"))


def required():
    return os.environ.get("APPENDGUARD_REQUIRE_FUSE") == "1" or os.environ.get("APPENDGUARD_REQUIRE_REAL_CLIENTS") == "1"


def worker(phase, log_dir, src, dirs, lib=False):
    """Runs matrix_ops.py PHASE over dirs; returns ({(dir index, op): result}, stderr)."""
    env = harness.child_env(mode="1" if lib else None, preload=lib, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [CLIENT, WORKER, phase, log_dir, src, *dirs]
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=400)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} (lib={lib}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["dir"], r["op"])] = r
    return out, proc.stderr


def trees(directory):
    return {op: matrix.files_of(os.path.join(directory, op)) for op in matrix_ops.OPERATIONS}


def copy_tree(source, target, append_only=False):
    """Copies source's files into target with plain sequential writes (which every store accepts), without
    the library; append_only: then sets chattr +a on each file (a `chattr +a` store's pre-existing files)."""
    for base, _, names in os.walk(source):
        into = os.path.join(target, os.path.relpath(base, source))
        os.makedirs(into, exist_ok=True)
        for name in names:
            with open(os.path.join(base, name), "rb") as f:
                data = f.read()
            with open(os.path.join(into, name), "wb") as f:
                f.write(data)
            if append_only:
                matrix_ops.set_append_only(os.path.join(into, name))


# Cells known to break the rule, each with why (docs/stores.md says the same under the table). Every
# other cell must obey it, and a cell listed here must break it exactly as described (test_rule).
KNOWN_BREAKS = {}  # the last (read_by_other_named on the held stores) obeys the rule since issue 26's round
# How a known break must look (without, with the library) when it is not "fails / fails": a cell listed
# here must keep exactly these classes, with no appendguard line.
KNOWN_BREAK_CLASSES = {}


def appendguard_lines(path):
    try:
        with open(path, errors="replace") as f:
            # A line of ours may follow what the program left unfinished on the line (tqdm's progress
            # bar, as transformers' save_pretrained draws it, ends in a carriage return, not a newline).
            return [line[line.index("appendguard: "):].rstrip("\n") for line in f if "appendguard: " in line]
    except OSError:
        return []


def run_doctor(store_dir):
    """`appendguard doctor DIR` in a fresh folder of the store, with the default configuration."""
    directory = os.path.join(store_dir, "doctor")
    os.makedirs(directory)
    env = harness.child_env(mode=None, preload=False, APPENDGUARD_LIBRARY=harness.LIB)
    try:
        proc = subprocess.run([LAUNCHER, "doctor", directory], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
    except subprocess.TimeoutExpired as expired:
        return {"status": "timeout", "output": f"timed out after 60 s: {expired.output}"}
    return {"status": proc.returncode, "output": proc.stdout}


# doctor's measured cases (src/cli/mount_probe.cpp shell_cases) -> the matrix operation they imitate
DOCTOR_CASES = {"create (printf > new file)": "create", "overwrite (printf > existing file)": "overwrite_wb",
                "append without a seek (>>)": "append_shell",
                "append without a seek (dd oflag=append)": "append_dd",
                "write at the end (dd seek=1 bs=4)": "dd_seek_end", "write below the end (dd at 0)": "write_below_end"}
DOCTOR_BUCKET = {"works": "identical", "refused loudly, file intact": "loud", "fails, file intact": "fails",
                 "WRONG BYTES, exit 0": "bad", "FAILS, FILE CHANGED": "bad"}
MATRIX_BUCKET = {"identical": "identical", "loud": "loud", "fails": "fails", "wrong": "bad", "changed": "bad",
                 "destroyed": "bad"}


def parse_doctor(output):
    """(reopen mode word, {case: (without, with)}, [recommended lines], said all good)."""
    import re
    reopen, cases, recommended, in_recommended = None, {}, [], False
    for line in output.splitlines():
        if line.startswith("reopen:"):
            reopen = line.split()[1]
        stripped = line.strip()
        for case in DOCTOR_CASES:
            if stripped.startswith(case):
                fields = re.split(r"\s{2,}", stripped[len(case):].strip())
                cases[case] = (fields[0], fields[1])
        if line.startswith("recommended:"):
            in_recommended = True
        elif in_recommended and line.startswith("  - "):
            recommended.append(line[4:])
        elif not line.startswith("  "):
            in_recommended = False
    return reopen, cases, recommended, "appendguard doctor: all good" in output


def progress(text):
    print(f"matrix: {text}", file=sys.stderr, flush=True)


def run_matrix(root):
    src, setup, local = (os.path.join(root, name) for name in ("src", "setup", "local"))
    matrix_ops.make_sources(src)
    logs = {name: os.path.join(root, f"logs-{name}") for name in ("setup", "local", "plain", "lib")}
    for directory in logs.values():
        os.makedirs(directory)
    worker("setup", logs["setup"], src, [setup])
    copy_tree(setup, local)
    results, _ = worker("act", logs["local"], src, [local])
    failed = {op: r["error"] for (_, op), r in results.items() if not r["ok"] and op not in matrix_ops.MUST_REFUSE}
    if failed:
        raise RuntimeError(f"operations failed on a local disk: {failed}")
    local_after = trees(local)
    progress("local reference done")
    keys = list(matrix_stores.STORES)
    out = {"stores": {}, "exit_notes": {}}
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(matrix_stores.moto_server(CLIENT, root))
        dirs, before = {"plain": [], "lib": []}, {"plain": [], "lib": []}
        for key in keys:
            base = os.path.join(root, key)
            os.makedirs(base)
            directory = stack.enter_context(matrix_stores.mounted_store(key, base, endpoint))
            for mode in dirs:
                d = os.path.join(directory, mode)
                copy_tree(setup, d, append_only=matrix_stores.STORES[key][1] == "chattr")
                dirs[mode].append(d)
                before[mode].append(trees(d))
        progress("stores mounted and set up")
        # doctor first, on the fresh mounts: rclone minimal can hang an unlink of doctor's scratch file for
        # good when the store has just refused other handles (seen once after the operations).
        out["doctor"] = {key: run_doctor(os.path.dirname(dirs["plain"][i])) for i, key in enumerate(keys)}
        progress("doctor done")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {mode: pool.submit(worker, "act", logs[mode], src, dirs[mode], mode == "lib") for mode in dirs}
            runs = {mode: future.result() for mode, future in futures.items()}
        progress("operations done")
        for i, key in enumerate(keys):
            after = {mode: trees(dirs[mode][i]) for mode in dirs}
            cells = {}
            for op in matrix_ops.OPERATIONS:
                cell = {}
                for mode in dirs:
                    r = runs[mode][0][(i, op)]
                    notes = appendguard_lines(os.path.join(logs[mode], str(i), f"{op}.err"))
                    cell[mode] = matrix.classify(r["ok"], bool(notes), before[mode][i][op], after[mode][op],
                                                 local_after[op])
                    cell[f"{mode}_error"] = r["error"]
                    cell[f"{mode}_notes"] = notes[:3]
                cells[op] = cell
            out["stores"][key] = cells
    out["exit_notes"] = [line for line in runs["lib"][1].splitlines() if line.startswith("appendguard:")][:10]
    return out


class MatrixTest(unittest.TestCase):
    results = None
    error = None

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="matrix-", dir=TMP)
        started = time.monotonic()
        try:
            cls.results = run_matrix(cls.root)
        except matrix_stores.StoreMissing as missing:
            if required():
                raise
            raise unittest.SkipTest(str(missing))
        cls.seconds = time.monotonic() - started
        with open(RESULTS, "w") as f:
            json.dump(cls.results, f, indent=1)
        c = matrix.counts(cls.results)
        print(f"matrix: {cls.seconds:.0f} s, {c['cells']} cells with the library: {c['identical']} identical, "
              f"{c['loud']} loud, {len(c['breaking'])} breaking the rule; results in {RESULTS}",
              file=sys.stderr, flush=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def labels(self):
        return {key: value[0] for key, value in matrix_stores.STORES.items()}

    def test_rule(self):
        c = matrix.counts(self.results)
        lines = []
        for store, op, why in c["breaking"]:
            cell = self.results["stores"][store][op]
            line = (f"{store} / {op}: {why} (without: {cell['plain']} {cell['plain_error']!r}; "
                    f"with: {cell['lib_error']!r} {cell['lib_notes'][:1]})")
            known = KNOWN_BREAKS.get((store, op))
            # A known break must stay exactly what it is: failing as without the library (or as
            # KNOWN_BREAK_CLASSES says), with no line.
            expected = KNOWN_BREAK_CLASSES.get((store, op), ("fails", "fails"))
            if known and (cell["plain"], cell["lib"]) == expected and not cell["lib_notes"]:
                continue
            lines.append(line)
        breaking = {(store, op) for store, op, _ in c["breaking"]}
        lines += [f"{store} / {op}: listed in KNOWN_BREAKS but obeys the rule now: take it out"
                  for store, op in KNOWN_BREAKS if (store, op) not in breaking]
        self.assertEqual(lines, [], f"{len(lines)} of {c['cells']} cells break the rule:\n" + "\n".join(lines))

    def test_doctor_agrees_with_the_matrix(self):
        """doctor DIR on each store: the reopen mode the library uses there, its measured cases the same as the
        matrix's cells (both without and with the library), "all good" only where none of them breaks the
        rule, and no recommended APPENDGUARD_REOPEN that is already the mode in use."""
        for key, doctor in self.results["doctor"].items():
            with self.subTest(key):
                reopen, cases, recommended, all_good = parse_doctor(doctor["output"])
                # rclone writes (also over S3) is of kind appends: its mode is read from rclone's command line.
                write_once = key in ("rclone-off", "rclone-minimal", "aofs-s3", "aofs-volumes")
                self.assertEqual(reopen, "hold" if write_once else "append", doctor["output"])
                self.assertEqual(sorted(cases), sorted(DOCTOR_CASES), doctor["output"])
                broken = []
                for case, op in DOCTOR_CASES.items():
                    cell = self.results["stores"][key][op]
                    if matrix.rule_break(op, cell["plain"], cell["lib"]):
                        broken.append(op)
                    if key == "chattr":
                        continue  # doctor's scratch files are not chattr +a: it cannot see a per-file attribute
                    measured = (DOCTOR_BUCKET[cases[case][0]], DOCTOR_BUCKET[cases[case][1]])
                    expected = (MATRIX_BUCKET[cell["plain"]], MATRIX_BUCKET[cell["lib"]])
                    if op in matrix_ops.MUST_REFUSE:  # dd opens O_WRONLY, the matrix "r+b": only "with" compares
                        measured, expected = measured[1:], expected[1:]
                    self.assertEqual(measured, expected,
                                     f"{key}, doctor's {case!r} vs the matrix's {op}\n{doctor['output']}")
                if key != "chattr":
                    self.assertEqual(all_good, not broken, f"{key}: matrix breaks {broken}\n{doctor['output']}")
                    self.assertEqual(doctor["status"], 1 if broken else 0, doctor["output"])
                for line in recommended:
                    if line.startswith("APPENDGUARD_REOPEN="):
                        self.assertNotEqual(line.split("=", 1)[1].split(":")[0], reopen, doctor["output"])

    def test_docs_table(self):
        section = matrix.table(self.results, self.labels())
        with open(DOC) as f:
            text = f.read()
        if os.environ.get("APPENDGUARD_MATRIX_WRITE_DOC") == "1":
            with open(DOC, "w") as f:
                f.write(matrix.replace_section(text, section))
            return
        self.assertEqual(matrix.current_section(text), section,
                         "docs/stores.md's matrix differs from what was measured: rerun with "
                         "APPENDGUARD_MATRIX_WRITE_DOC=1 ctest -R e2e.matrix and commit docs/stores.md")


def main():
    e2e_support.aofs.skip_or_fail_without_fuse("the conformance matrix")
    if not CLIENT or not os.path.exists(CLIENT):
        if required():
            print("FAIL: APPENDGUARD_CLIENT_PYTHON is not set (the matrix runs the real clients)", file=sys.stderr)
            sys.exit(1)
        print("SKIP: APPENDGUARD_CLIENT_PYTHON is not set")
        sys.exit(77)
    e2e_support.check_library_is_effective()
    e2e_support.install_signal_handlers()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
