"""Run by ctest after the launchers tests (FIXTURES_CLEANUP): kills every process that still carries this
build's AG_LAUNCHERS_RUN marker (a daemon or rank of a test that ctest killed at its timeout, which
could not clean up itself), and fails naming them. Nothing of another build's tests is touched."""
import sys

from launchers_support import BUILD_KEY, kill_marked

if __name__ == "__main__":
    left = kill_marked(f"{BUILD_KEY}:", grace=0)
    for pid, command in left:
        print(f"killed pid {pid}, left by a launchers test: {command}")
    sys.exit(1 if left else 0)
