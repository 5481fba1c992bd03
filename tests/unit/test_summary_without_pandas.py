"""The job's summary and the straggler tables (what ``summary`` and ``stragglers`` run in process) neither import
pandas nor use it: each check runs in a fresh interpreter, the second with a stand-in pandas module whose every use
(anything but an ``isinstance`` check) raises."""

import subprocess
import sys
from pathlib import Path

import pytest

from standin_pandas import STAND_IN

JOBS = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_summary_modules_import_without_pandas():
    code = (
        "import sys\n"
        "import holotrace.analysis.job_summary, holotrace.analysis.rank_summary, holotrace.analysis.reduce\n"
        "import holotrace.analysis.stragglers, holotrace.analysis.waits, holotrace.scale.store\n"
        "import holotrace.commands.summary, holotrace.commands.stragglers, holotrace.render.summary_lines\n"
        "assert 'pandas' not in sys.modules and 'pyarrow' not in sys.modules, 'pandas or pyarrow imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("job", ["hta_trace_filter_2rank", "hta_critical_path_cuda_event_sync"])
def test_summary_and_stragglers_use_no_pandas(job):
    code = STAND_IN + (
        "from holotrace.commands._load import load_path\n"
        "from holotrace.analysis.job_summary import summarize_job\n"
        "from holotrace.commands import summary, stragglers\n"
        f"job = load_path({str(JOBS / job)!r})\n"
        "js = summarize_job(job)\n"
        "report = summary.build_report(js)\n"
        "assert len(js.frames['temporal']) == len(job.ranks) and report.sections\n"
        "rep = stragglers.build_report(job)\n"
        "assert len(rep.data['straggler_summary']) == (len(job.ranks) if len(job.ranks) > 1 else 0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
