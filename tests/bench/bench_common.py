"""What the bench scripts share (scripts/bench, raw_syscalls/raw_bench.py, checkpoint/checkpoint_bench.py):
the Python with torch to run a workload in, the load average to report beside timings, and the median's
confidence interval."""
import math
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def python():
    """The venv's Python (APPENDGUARD_VENV, default the repository's build/venv), else this one."""
    venv = os.environ.get("APPENDGUARD_VENV", str(REPO / "build" / "venv"))
    candidate = Path(venv) / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


def load_average():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def median_interval(values):
    """A distribution-free ~95% confidence interval of the median (binomial order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    k = max(0, int((n - 1.96 * math.sqrt(n)) / 2))
    return ordered[k], ordered[n - 1 - k]
