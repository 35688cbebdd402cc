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


def worker(phase, log_dir, src, dirs, lib=False, chattr=False):
    """Runs matrix_ops.py PHASE; returns {op: result} for act. Raises when the worker itself fails."""
    env = harness.child_env(mode="1" if lib else None, preload=lib, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [CLIENT, WORKER, phase, log_dir, src, *(["--chattr"] if chattr else []), *dirs]
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} (lib={lib}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r["op"]] = r
    return out, proc.stderr


def trees(directory):
    return {op: matrix.files_of(os.path.join(directory, op)) for op in matrix_ops.OPERATIONS}


def appendguard_lines(path):
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n") for line in f if line.startswith("appendguard:")]
    except OSError:
        return []


def run_local(root, src):
    local = os.path.join(root, "local")
    logs = os.path.join(root, "logs-local")
    os.makedirs(logs)
    worker("setup", logs, src, [local])
    results, _ = worker("act", logs, src, [local])
    failed = {op: r["error"] for op, r in results.items() if not r["ok"] and op not in matrix_ops.MUST_REFUSE}
    if failed:
        raise RuntimeError(f"operations failed on a local disk: {failed}")
    return trees(local)


def run_store(key, root, src, endpoint, local_after):
    started = time.monotonic()
    base = os.path.join(root, key)
    os.makedirs(base)
    chattr = matrix_stores.STORES[key][1] == "chattr"
    cells = {}
    with matrix_stores.mounted_store(key, base, endpoint) as directory:
        runs = {}
        dirs = {mode: os.path.join(directory, mode) for mode in ("plain", "lib")}
        logs = {mode: os.path.join(base, f"logs-{mode}") for mode in dirs}
        for mode in dirs:
            os.makedirs(logs[mode])
        worker("setup", logs["plain"], src, list(dirs.values()), chattr=chattr)
        before = {mode: trees(dirs[mode]) for mode in dirs}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {mode: pool.submit(worker, "act", logs[mode], src, [dirs[mode]], mode == "lib") for mode in dirs}
            for mode, future in futures.items():
                runs[mode] = future.result()
        after = {mode: trees(dirs[mode]) for mode in dirs}
        for op in matrix_ops.OPERATIONS:
            cell = {}
            for mode in dirs:
                r = runs[mode][0][op]
                notes = appendguard_lines(os.path.join(logs[mode], f"{op}.err"))
                cell[mode] = matrix.classify(r["ok"], bool(notes), before[mode][op], after[mode][op], local_after[op])
                cell[f"{mode}_error"] = r["error"]
                cell[f"{mode}_notes"] = notes[:3]
            cells[op] = cell
        cells_exit = runs["lib"][1]
    print(f"matrix: {key}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return cells, [line for line in cells_exit.splitlines() if line.startswith("appendguard:")][:5]


def run_matrix(root):
    src = os.path.join(root, "src")
    matrix_ops.make_sources(src)
    local_after = run_local(root, src)
    results = {"stores": {}, "exit_notes": {}}
    with contextlib_exit_stack() as stack:
        endpoint = stack.enter_context(matrix_stores.moto_server(CLIENT, root))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {key: pool.submit(run_store, key, root, src, endpoint, local_after)
                       for key in matrix_stores.STORES}
            for key, future in futures.items():
                results["stores"][key], results["exit_notes"][key] = future.result()
    return results


def contextlib_exit_stack():
    import contextlib
    return contextlib.ExitStack()


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
            lines.append(f"{store} / {op}: {why} (without: {cell['plain']} {cell['plain_error']!r}; "
                         f"with: {cell['lib_error']!r} {cell['lib_notes'][:1]})")
        self.assertEqual(lines, [], f"{len(lines)} of {c['cells']} cells break the rule:\n" + "\n".join(lines))

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
