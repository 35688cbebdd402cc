"""appendguard: make programs write checkpoints to append-only mounts without patching them.

The wheel carries the preload library and the launcher; this package only finds them:

    appendguard run -- torchrun train.py        # the console command (the launcher)
    python -m appendguard run -- python save.py # the same
    LD_PRELOAD=$(python -m appendguard --library) APPENDGUARD=1 python save.py
"""
import os

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    """The absolute path of libappendguard.so inside this installed package."""
    return os.path.join(_HERE, "lib", "libappendguard.so")


def launcher_path():
    """The absolute path of the appendguard launcher inside this installed package."""
    return os.path.join(_HERE, "bin", "appendguard")
