"""A stand-in ``pandas`` module for the tests that a code path uses no pandas: put first in a fresh interpreter's
code, it takes pandas' place in ``sys.modules``; any use (anything but an ``isinstance`` check) raises."""

STAND_IN = """
import sys, types
class _Pandas(types.ModuleType):
    class DataFrame: pass
    class Series: pass
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError("pandas used: " + name)
sys.modules["pandas"] = _Pandas("pandas")
"""
