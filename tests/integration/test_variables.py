"""Variable names: an unknown APPENDGUARD* name stops an enabled process before main; the library loaded
with APPENDGUARD unset says that the other settings are ignored; the one table of names (core/variables.h)
is what `appendguard run --help` lists and docs/reference.md documents."""
import os
import re
import subprocess
import unittest

from harness import TempDirTest, child_env, program, results, run

LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "reference.md")
MAN_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "appendguard.1")


class VariablesTest(TempDirTest):
    def backward(self, mode="1", **env):
        return run([program("probe"), "backward", self.path("x.safetensors")], mode=mode, **env)

    def test_unknown_name_is_status_2_before_main_with_the_closest_name(self):
        for name, closest in (("APPENDGUARD_PATH", "APPENDGUARD_PATHS"), ("APPENDGUARD_ONVIOLATION",
                                                                          "APPENDGUARD_ON_VIOLATION"),
                              ("APPENDGUARDLOG", "APPENDGUARD_LOG")):
            for mode in ("1", "audit"):
                with self.subTest(name=name, mode=mode):
                    proc = self.backward(mode=mode, **{name: "x"})
                    self.assertEqual(proc.returncode, 2, proc.stderr)
                    self.assertEqual(proc.stdout, "")  # before main
                    self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
                    self.assertIn(f"unknown variable {name}='x': did you mean {closest}?", proc.stderr)

    def test_a_misspelt_mode_variable_is_answered_by_its_value(self):
        proc = self.backward(APPENDGUARD_MODE="enforcee")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("unknown variable APPENDGUARD_MODE='enforcee': did you mean APPENDGUARD=enforce?", proc.stderr)

    def test_appendguard_takes_the_boolean_words_of_the_other_switches(self):
        for word, write_back in (("yes", "-1 errno=EOPNOTSUPP"), ("true", "-1 errno=EOPNOTSUPP"), ("no", "5"),
                                 ("false", "5")):
            with self.subTest(word=word):
                proc = self.backward(mode=word, APPENDGUARD_TRACE=word)
                self.assertOk(proc)
                self.assertEqual(results(proc.stdout)["write_back"], write_back)

    def test_tooling_and_internal_names_are_accepted(self):
        # The names ctest and scripts export (core/variables.h, kind kTooling) never stop a program.
        proc = self.backward(APPENDGUARD_E2E_TMP="/tmp", APPENDGUARD_REQUIRE_FUSE="1", APPENDGUARD_VENV="/v",
                             APPENDGUARD_SUMMARY="0")
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["write_back"], "-1 errno=EOPNOTSUPP")

    def test_loaded_with_appendguard_unset_says_so_once_and_runs(self):
        proc = self.backward(mode=None, APPENDGUARD_PATHS="*.safetensors")
        self.assertOk(proc)
        self.assertEqual(results(proc.stdout)["write_back"], "5")  # inert, as asked
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn("APPENDGUARD is not set (not exported?), so APPENDGUARD_PATHS ignored", proc.stderr)
        for mode in ("off", "0"):  # inert on purpose: nothing to say
            with self.subTest(mode=mode):
                proc = self.backward(mode=mode, APPENDGUARD_PATHS="*.safetensors")
                self.assertEqual(proc.stderr, "")

    def test_a_pattern_that_cannot_match_is_said_at_start_up(self):
        for paths, why in (("*.safetensors,*.bin", "contains ','"), (self.dir, "names a directory"),
                           (self.dir + "/", "cannot match any file: it ends with '/'"),
                           ("*.safetensor", "not '.safetensors': misspelt?")):
            with self.subTest(paths=paths):
                proc = self.backward(APPENDGUARD_PATHS=paths)
                self.assertOk(proc)  # said, not refused: the program runs
                self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
                self.assertTrue(proc.stderr.startswith(f"appendguard: APPENDGUARD_PATHS pattern '{paths}' "),
                                proc.stderr)
                self.assertIn(why, proc.stderr)
        self.assertNotIn("APPENDGUARD_PATHS pattern", self.backward(APPENDGUARD_PATHS=self.dir + "/**").stderr)

    def test_launcher_refuses_unknown_names_too(self):
        env = child_env(mode=None, preload=False, APPENDGUARD_PATH="/mnt/**")
        proc = subprocess.run([LAUNCHER, "run", "--", "true"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        self.assertIn("did you mean APPENDGUARD_PATHS?", proc.stderr)

    def test_the_man_page_documents_every_setting_and_option(self):
        out = subprocess.run([LAUNCHER, "run", "--help"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        settings = re.findall(r"^  (APPENDGUARD[A-Z_]*) .*\n +accepted:", out, re.M)
        self.assertIn("APPENDGUARD_SPOOL", settings)
        options = re.findall(r"^  (--[a-z-]+)", out, re.M)
        with open(MAN_PAGE) as f:
            page = f.read()
        documented = set(re.findall(r"^\.B (APPENDGUARD[A-Z_]*)$", page, re.M))
        self.assertEqual(sorted(set(settings) - documented), [], "settings missing from docs/appendguard.1")
        page_options = {o.replace("\\-", "-") for o in re.findall(r"^\.BI? ((?:\\-)+[a-z\\-]+)", page, re.M)}
        self.assertEqual(sorted(set(options) - page_options), [], "options missing from docs/appendguard.1")

    def test_usage_lists_the_table_and_the_reference_documents_it(self):
        out = subprocess.run([LAUNCHER, "run", "--help"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        names = {n for n in re.findall(r"\bAPPENDGUARD[A-Z0-9_]*", out) if not n.endswith("_")}
        for name in ("APPENDGUARD", "APPENDGUARD_PATHS", "APPENDGUARD_SUMMARY", "APPENDGUARD_CARRIED_FDS",
                     "APPENDGUARD_LIB"):
            self.assertIn(name, names)
        with open(REFERENCE) as f:
            documented = set(re.findall(r"`(APPENDGUARD[A-Z0-9_]*)`", f.read()))
        self.assertEqual(sorted(names - documented), [], "names in the table but not in docs/reference.md")
        # The other way: a name documented in docs/reference.md but missing from the table (and so from the
        # usage, which tests/unit/test_launch_options.cpp checks against the table) fails too.
        self.assertEqual(sorted(documented - names), [], "names in docs/reference.md but not in the table")
        # The reference's option column says what the usage says (the table's flag), setting by setting.
        usage_option = dict(re.findall(r"^  (APPENDGUARD[A-Z_]*) .*\n +accepted: .*?(?:; option (--[a-z-]+))?$", out,
                                       re.M))
        with open(REFERENCE) as f:
            rows = re.findall(r"^\| `(APPENDGUARD[A-Z_]*)` \|([^|]*)\|", f.read(), re.M)
        self.assertEqual(sorted(name for name, _ in rows), sorted(usage_option), "settings of docs vs the table")
        for name, cell in rows:
            if name == "APPENDGUARD":
                continue  # --enforce and --audit, the launcher's own
            with self.subTest(name=name):
                self.assertEqual(re.findall(r"`(--[a-z-]+)`", cell), [usage_option[name]] if usage_option[name] else [])
        # Every option the usage lists is accepted by the launcher.
        for option in re.findall(r"^  (--[a-z-]+)", out, re.M):
            with self.subTest(option=option):
                args = [option] if option in ("--enforce", "--audit", "--trace", "--no-python-stack") else [option, "x"]
                proc = subprocess.run([LAUNCHER, "run", *args, "--", "true"], env=child_env(mode=None, preload=False),
                                      capture_output=True, text=True, timeout=60)
                self.assertNotIn("unknown option", proc.stderr)


if __name__ == "__main__":
    unittest.main()
