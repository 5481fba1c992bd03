"""Tasks on a Ray cluster (the ``ray`` extra: ``pip install 'holotrace[ray]'``).

Each item becomes one Ray task (one CPU). At most a few tasks per cluster CPU are in flight, so the
driver never holds more than that many results it has not consumed; results come back as they finish.
A task whose worker process dies is retried by Ray (``max_retries``, once by default: holotrace's callers run a
task lost beyond that once more, :mod:`holotrace.exec.retry`); a task that still fails gives a
:class:`~holotrace.exec.executor.TaskFailed`. Ctrl-C cancels the tasks in flight and re-raises.

Workers must be able to import holotrace: on a cluster, install the same holotrace version on every node
(or ship it with a Ray runtime environment). Only the function's arguments (paths, options) travel to
the workers and only its return value travels back.
"""

from __future__ import annotations

import logging
from typing import Optional

from holotrace.exec.tasks import Executor, ExecutorError, TaskFailed, _call, _finish

__all__ = ["RayExecutor"]

log = logging.getLogger("holotrace")
_IN_FLIGHT_PER_CPU = 4


def _ray():
    try:
        import ray  # the optional extra
    except ImportError:
        raise ExecutorError(
            "the ray executor needs Ray, which is not installed",
            fix="pip install 'holotrace[ray]', or use --executor local",
        ) from None
    return ray


def _driver_messages_to_log() -> None:
    """Ray's driver prints what its raylets report (a worker died, a task is retried) on stdout, where a command's
    output goes (a JSON document, a CSV): those lines go to holotrace's log instead (shown with -v). What
    holotrace itself makes of a lost worker (a retry, then a finding) is reported as usual."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:  # another Ray layout: its messages stay where Ray prints them
        return
    real = getattr(ray_worker, "print_to_stdstream", None)
    if real is None or getattr(real, "holotrace_log", False):
        return

    def to_log(data, *args, **kwargs):
        if data.get("is_err") or data.get("pid") != "raylet":
            return real(data, *args, **kwargs)
        for line in data.get("lines", []):
            log.debug("ray: %s", line)

    to_log.holotrace_log = True
    ray_worker.print_to_stdstream = to_log


class RayExecutor(Executor):
    """Ray tasks. ``address``: ``auto`` (the cluster this machine belongs to), ``HOST:PORT`` (a head node), or
    None: the Ray instance this process already joined, else a new one on this machine (``num_cpus`` CPUs)."""

    name = "ray"
    local = False

    def __init__(self, address: Optional[str] = None, *, num_cpus: Optional[int] = None, max_retries: int = 1):
        ray = _ray()
        self._started = False
        self.max_retries = int(max_retries)
        if not ray.is_initialized():
            kw = {"address": address} if address else {"num_cpus": num_cpus}
            try:
                ray.init(
                    ignore_reinit_error=True,
                    log_to_driver=False,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    **kw,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ExecutorError(
                    f"cannot reach the Ray cluster at {address or 'this machine'}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                    fix="start the cluster (ray start --head), pass --ray-address auto|HOST:PORT, or use --executor local",
                ) from None
            self._started = True
        _driver_messages_to_log()
        self.local = not address and self._started  # a Ray instance started here runs on this machine

    @property
    def workers(self) -> int:
        ray = _ray()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def map(self, fn, items, *, on_done=None, keep=None) -> list:
        ray = _ray()
        items = list(items)
        results: list = [None] * len(items)
        if not items:
            return results
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries)(_call)
        fn_ref = ray.put(fn)
        window = max(2, _IN_FLIGHT_PER_CPU * self.workers)
        pending: dict = {}
        nxt = 0
        try:
            while nxt < len(items) or pending:
                while nxt < len(items) and len(pending) < window:
                    pending[remote.remote(fn_ref, items[nxt])] = nxt
                    nxt += 1
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    try:
                        r = ray.get(ref)
                    except ray.exceptions.RayError as e:  # worker lost beyond the retries, task cancelled ...
                        r = TaskFailed(type(e).__name__, str(e).splitlines()[0] if str(e) else "the Ray task failed")
                    results[i] = _finish(i, r, keep, on_done)
        except BaseException:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # already finished or its worker is gone: nothing left to cancel
                    pass
            raise
        return results

    def close(self) -> None:
        if self._started:
            _ray().shutdown()
            self._started = False
