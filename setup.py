"""Build of the compiled event scanner, the job replay's sweep, the group sums and the call-stack sweep; everything else
is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "holotrace.ingest._scan",
            sources=["src/holotrace/ingest/_scan.c"],
            depends=[
                "src/holotrace/ingest/_scan_util.h",
                "src/holotrace/ingest/_scan_event.h",
                "src/holotrace/ingest/_scan_py.h",
            ],
            extra_compile_args=["-O2", "-std=gnu99"],
        ),
        Extension(
            "holotrace.analysis.critical_path._replay",
            sources=["src/holotrace/analysis/critical_path/_replay.c"],
            extra_compile_args=["-O2", "-std=gnu99"],
        ),
        Extension(
            "holotrace.analysis._grouped",
            sources=["src/holotrace/analysis/_grouped.c"],
            extra_compile_args=["-O2", "-std=gnu99", "-ffp-contract=off"],
        ),
        Extension(
            "holotrace.analysis._callstack",
            sources=["src/holotrace/analysis/_callstack.c"],
            extra_compile_args=["-O2", "-std=gnu99"],
        ),
    ]
)
