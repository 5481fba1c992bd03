"""The advice path (``job_advice``, ``costliest_rank``: what ``advise``, ``summary`` and ``stragglers`` run) neither
imports pandas nor uses it: each check runs in a fresh interpreter, the second with a stand-in pandas module whose
every use (anything but an ``isinstance`` check) raises."""

import subprocess
import sys
from pathlib import Path

import pytest

from standin_pandas import STAND_IN

JOBS = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_advice_module_imports_without_pandas():
    code = (
        "import sys\n"
        "from holotrace.analysis.critical_path.advice import costliest_rank, job_advice\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("job", ["hta_trace_filter_2rank", "hta_critical_path_cuda_event_sync"])
def test_advice_uses_no_pandas(job):
    code = STAND_IN + (
        "from holotrace.commands._load import load_path\n"
        "from holotrace.analysis.critical_path.advice import costliest_rank, job_advice\n"
        "from holotrace.commands.advise import build_report\n"
        f"job = load_path({str(JOBS / job)!r})\n"
        "a = job_advice(job, combine=[['straggler', 'communication']])\n"
        "build_report(a)\n"
        "c = costliest_rank(job)\n"
        "assert c.rank is not None and c.why and c.rank == a.costliest.rank, (c, a.costliest)\n"
        "assert len(a.fix_table) and len(a.replay_table) == len(set(a.step_savings['step'].tolist()))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
