"""What the preload library brings into a host process: its exports, its dependencies, libunwind."""
import os
import re
import subprocess
import unittest

from harness import LIB, PYTHON, TempDirTest, run

from interposed import TABLE, names_listed_in_reference


def exported_by_library():
    out = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}




class LinkingTest(TempDirTest):
    def test_exports_exactly_the_names_of_the_table(self):
        # src/shim/interposed.def: a row without its hook, or a hook without its row, fails here.
        self.assertEqual(exported_by_library(), {row.name for row in TABLE})

    def test_reference_lists_the_names_of_the_table(self):
        self.assertEqual(names_listed_in_reference(), {row.name for row in TABLE})

    def test_every_64_bit_twin_is_a_row_of_its_kind(self):
        rows = {row.name: row for row in TABLE}
        for row in TABLE:
            if row.twin64 != "none":
                self.assertIn(row.twin64, rows, row.name)
                self.assertEqual(rows[row.twin64].kind, row.kind, row.name)

    def test_needs_only_libc(self):
        # libdl.so.2: glibc before 2.34 defines dlsym@GLIBC_2.2.5 there (a stub on newer glibc); no
        # ld-linux-x86-64.so.2: that came with libgcc's unwinder (_dl_find_object), which is not linked.
        out = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True, check=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
        self.assertEqual(sorted(needed), ["libc.so.6", "libdl.so.2"])

    def test_no_cpuid_constructor(self):
        # Issue 27: __builtin_cpu_supports links libgcc's __cpu_indicator_init, a constructor that runs a
        # dozen CPUID instructions at every load (each a hypervisor exit, ~60 us a process here); the
        # library asks for the one feature it uses at its first use (src/core/cpu_features.h).
        out = subprocess.run(["nm", LIB], capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1] for line in out.splitlines() if line.strip()}
        self.assertIn("_ZN11appendguard17current_mode_slowEv", names)  # a symbol table to look in
        self.assertFalse({"__cpu_indicator_init", "__cpu_model"} & names)

    # A guarded open (its site is recorded), then the process's maps.
    OPEN_GUARDED = ("import os, tempfile\n"
                    "open(os.path.join(tempfile.mkdtemp(), 'x.safetensors'), 'wb').close()\n")
    MAPS_HAVE_LIBUNWIND = "print(any('libunwind' in line for line in open('/proc/self/maps')))"

    def test_libunwind_is_loaded_only_when_a_stack_is_needed(self):
        # Issue 27: not at start-up (it was most of a new process's start): at the first guarded open.
        probe = self.MAPS_HAVE_LIBUNWIND
        self.assertEqual(run([PYTHON, "-c", probe], mode=None).stdout.strip(), "False")
        self.assertEqual(run([PYTHON, "-c", probe]).stdout.strip(), "False")
        probe = self.OPEN_GUARDED + self.MAPS_HAVE_LIBUNWIND
        self.assertEqual(run([PYTHON, "-c", probe], APPENDGUARD_BACKTRACE="0").stdout.strip(), "False")
        self.assertEqual(run([PYTHON, "-c", probe]).stdout.strip(), "True")

    def test_libunwind_does_not_take_over_cxx_exceptions(self):
        # Loaded RTLD_LOCAL, its _Unwind_* symbols stay out of the global scope.
        code = (self.OPEN_GUARDED + self.MAPS_HAVE_LIBUNWIND + "\n"
                "import ctypes\n"
                "libc = ctypes.CDLL(None)\n"
                "print(hasattr(libc, '_ULx86_64_step'), hasattr(libc, 'unw_backtrace'))\n")
        self.assertEqual(run([PYTHON, "-c", code]).stdout.split(), ["True", "False", "False"])


if __name__ == "__main__":
    unittest.main()
