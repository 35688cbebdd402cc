"""`python -m appendguard` and the `appendguard` console command.

`--library` prints the preload library's path (for LD_PRELOAD in launch scripts); anything else is
handed to the launcher in the package (`run`, `doctor`, `report`, `--help`, `--version`)."""
import os
import sys

from appendguard import launcher_path, library_path


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--library"]:
        path = library_path()
        if not os.path.isfile(path):
            print(f"appendguard: the library is missing from this installation: {path}", file=sys.stderr)
            return 1
        print(path)
        return 0
    launcher = launcher_path()
    if not os.access(launcher, os.X_OK):
        print(f"appendguard: the launcher is missing from this installation: {launcher}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(launcher, [launcher, *args])


if __name__ == "__main__":
    sys.exit(main())
