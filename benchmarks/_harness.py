"""Shared pieces of the benchmark scripts: generated-job cache, measured subprocesses, tables.

Standard library only: the HTA interpreter imports this module too, in its child processes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HTA_ENV = "HOLOTRACE_HTA_PYTHON"


# ---- generated jobs -------------------------------------------------------------------------


def default_work_dir():
    return os.path.join(tempfile.gettempdir(), "holotrace-bench")


def ensure_job(work, ranks, size_mb, steps, seed=0, world_size=None, gzip_output=False, straggler_rank=-1):
    """Generate a job under `work` (or reuse one generated earlier with the same options).

    Returns (job folder, summary dict from generate.py).  A job counts as complete only once its
    summary file exists next to the folder (not inside it: the loaders scan the folder for *.json).
    """
    sys.path.insert(0, HERE)
    import generate  # noqa: E402  (generator lives next to this file)

    world_size = world_size or ranks
    name = (
        f"job-{ranks}r-w{world_size}-{size_mb:g}mb-{steps}s-seed{seed}"
        + ("-gz" if gzip_output else "")
        + (f"-straggler{straggler_rank}" if straggler_rank >= 0 else "")
    )
    folder = os.path.join(work, name)
    summary_path = folder + ".summary.json"
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
        current = summary["generator"].get("version") == generate.VERSION
        if current and all(os.path.exists(x["path"]) for x in summary["files"]):
            print(f"reusing generated job {folder}")
            return folder, summary
    shutil.rmtree(folder, ignore_errors=True)
    summary = generate.generate(
        folder,
        ranks=ranks,
        target_mb=size_mb,
        steps=steps,
        gzip_output=gzip_output,
        seed=seed,
        world_size=world_size,
        straggler_rank=straggler_rank,
    )
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=2)
    return folder, summary


def warm(path):
    """Read every file under ``path`` (or the file itself) once, discarding the bytes: the timed run that follows
    finds the traces in the page cache, as a second look at a job does, whatever the machine's reclaim dropped
    while it sat idle (the disk is not what the benchmarks measure)."""
    files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        try:
            with open(f, "rb", buffering=0) as fh:
                while fh.read(8 << 20):
                    pass
        except OSError:
            pass


# ---- interpreters ---------------------------------------------------------------------------


def resolve_hta_python(cli_value, skip=False):
    """The interpreter that has HTA installed, or (None, reason)."""
    if skip:
        return None, "skipped (--skip-hta)"
    python = cli_value or os.environ.get(HTA_ENV)
    if not python:
        return None, f"no HTA interpreter: set {HTA_ENV} or pass --hta-python"
    try:
        r = subprocess.run(
            [python, "-c", "import hta.trace_analysis, hta.version as v; print(v.__version__)"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"HTA interpreter {python!r} unusable: {e}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"HTA not importable with {python!r}: {last}"
    print(f"HTA {r.stdout.strip()} via {python}")
    return python, None


def holotrace_status(attribute, python=sys.executable):
    """None if `holotrace.<attribute>` is importable by `python`, else the reason."""
    code = (
        "import sys; sys.path.append(sys.argv[1]); import holotrace; "
        f"assert callable(getattr(holotrace, {attribute!r}, None)), 'holotrace.{attribute} missing'"
    )
    r = subprocess.run([python, "-c", code, os.path.join(REPO, "src")], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return "holotrace unavailable: " + ((r.stderr.strip().splitlines() or ["?"])[-1])
    return None


def import_holotrace():
    """Import holotrace in a child: installed package first, else the repo's src/ folder."""
    try:
        import holotrace
    except ImportError:
        sys.path.append(os.path.join(REPO, "src"))
        import holotrace
    return holotrace


# ---- measured subprocesses ------------------------------------------------------------------


def _tree_rss(root):
    """Total RSS (bytes) of `root` and all its descendants, from /proc (Linux)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo, page = 0, [root], os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            pass
    return total


def _parse_time_v(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.strip().rpartition(": ")
                if key == "Maximum resident set size (kbytes)":
                    out["time_v_max_rss_mb"] = int(value) / 1024
                elif key.startswith("Elapsed (wall clock) time"):
                    parts = [float(x) for x in value.split(":")]
                    out["time_v_wall_s"] = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    except OSError:
        pass
    return out


def run_child(python, script, child_args, log_path, timeout, env=None):
    """Run `python script --child ...` in its own process group and measure it from outside.

    Returns a dict: the child's own JSON result (``result``), ``process_wall_s``, ``tree_peak_rss_mb``
    (sum of RSS over the child and its descendants, sampled every 50 ms), ``time_v_*`` from
    /usr/bin/time -v when available, and ``status`` (ok / error / timeout).
    """
    result_path = log_path + ".result.json"
    time_path = log_path + ".time"
    for p in (result_path, time_path):
        if os.path.exists(p):
            os.remove(p)
    cmd = [python, script, "--child", *child_args, "--child-result", result_path]
    if os.path.exists("/usr/bin/time"):
        cmd = ["/usr/bin/time", "-v", "-o", time_path, *cmd]
    peak = [0]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})}
        )
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        status = "ok"
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            os.killpg(proc.pid, signal.SIGKILL)  # the group of the child we started, nothing else
            proc.wait()
        done.set()
        sampler.join()
    out = {
        "status": status,
        "process_wall_s": time.perf_counter() - started,
        "tree_peak_rss_mb": peak[0] / 2**20,
        "log": log_path,
        **_parse_time_v(time_path),
        # other work on the machine skews timings: 1-minute load average before and after the run
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg()[0],
    }
    if status == "ok" and proc.returncode != 0:
        out["status"] = f"error: exit code {proc.returncode}"
    if os.path.exists(result_path):
        with open(result_path) as f:
            out["result"] = json.load(f)
        if "error" in out["result"] and out["status"] == "ok":
            out["status"] = "error: " + out["result"]["error"]
    elif out["status"] == "ok":
        out["status"] = "error: no result"
    if out["status"] != "ok":
        with open(log_path) as f:
            tail = f.read()[-1500:]
        print(f"  child failed ({out['status']}); last lines of {log_path}:\n" + tail)
    return out


def child_rusage():
    """Peak RSS (MB) of this process and of its waited-for children (largest single child)."""
    import resource

    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 2**20  # ru_maxrss is KiB on Linux
    return {
        "self_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
        "children_max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale,
    }


def write_child_result(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2, default=str)


def silence_plotly():
    """HTA calls fig.show() in some analyses even with visualize=False; never render in benchmarks."""
    try:
        import plotly.basedatatypes

        plotly.basedatatypes.BaseFigure.show = lambda *a, **k: None
    except ImportError:
        pass


# ---- output ---------------------------------------------------------------------------------


def fmt(value, digits=2):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def markdown_table(headers, rows):
    rows = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def ratio(a, b):
    """a / b when both are positive numbers, else None."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
        return a / b
    return None


def machine_info():
    info = {"python": sys.version.split()[0], "platform": sys.platform, "cpus": os.cpu_count()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return info
