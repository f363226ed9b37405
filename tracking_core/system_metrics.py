"""Per-node system metrics: one sampler per node, off the training thread, into every tracker.

Asked for with ``--tracking-system-metrics`` / ``$TRACKING_CORE_SYSTEM_METRICS`` (``1`` for every
10 s, or the seconds between samples; off unless asked). :func:`start_sampler` is called at the
end of ``start_run`` and of ``attach`` (a non-writer rank's too), so any process of the job may
become its node's sampler. Which one is decided without a collective call, by the node's lock for
the run: ``runs/<run id>/system-metrics-<host>.lock`` in the process's tracking directory. On
Linux the lock is an abstract Unix socket named after that file's path (the first to bind the
name samples): no file, so deleting the lock file (a ``/tmp`` cleaner, an ``rm`` of old runs)
cannot let a second process sample beside the first; elsewhere it is an exclusive ``flock`` on
the file. Either goes with its process (or its sampler's stop). The host's name is in the lock
file's name, so a tracking directory shared by several nodes (NFS) still gives one sampler per
node. Every other process stands by: a thread that tries the lock once per interval and takes
over, numbering on from the last sample, should the sampling process end first. The file keeps
what a successor needs: the next sample's number and the node's rank as the first sampler
recorded it (the node's rank stays the node's when a process of another launch takes over); the
sampler writes it after each sample, so a deleted file is back at the next.

The sampler is a daemon thread. It logs through its own writer: a run attached as role
``system`` (``writer=True``, names as given, no collectors), so every selected tracker receives
the series like any metric, on the step axis ``system/<host>/sample`` with the sample number as
step::

    system/<host>/cpu/utilization            % of all CPUs, over the last interval
    system/<host>/memory/used_percent        (total - available) / total
    system/<host>/memory/used_gib
    system/<host>/disk/<mount>/used_percent  the file system of the tracking directory
    system/<host>/network/sent_mib_s         all interfaces but loopback
    system/<host>/network/recv_mib_s
    system/<host>/gpu<i>/utilization         per GPU that NVML sees (its NVML index)
    system/<host>/gpu<i>/memory_used_gib
    system/<host>/gpu<i>/power_w
    system/<host>/gpu<i>/temperature_c

``<host>`` is the host name as a file name (:func:`tracking_core.names.path_part`: a dotted
FQDN stays as it is). The node's facts -- node rank where the launcher says it
(``GROUP_RANK``, ``NODE_RANK``, ``SLURM_NODEID``), CPUs, memory, GPUs, interval -- go into the
system role's config under ``system/<host>/...``, not into the series names, which stay the same
when a job is placed anew.

Host series come from ``/proc`` on Linux (no dependency) and from psutil elsewhere; GPU series
from NVML (``nvidia-ml-py``, the ``system`` extra). Without NVML or without a GPU, one info line
says so and the host series go on alone. A part that fails (a file of ``/proc``, a GPU NVML
loses) is left out of that sample with one warning; the others go on, and nothing reaches the
training loop. At exit the sampler takes a last sample (when at least a second has passed),
finishes its writer and lets the lock go. The primary's ``finish`` ends its node's sampling
first (:func:`end_sampling`), so that the last samples come before the close; other nodes sample
until their processes exit.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import options as opts
from . import settings
from .errors import WarnOnce
from .files import close_quietly
from .handle import RunHandle, local_tracking_dir
from .names import path_part
from .system_readers import (
    Gpus,
    HostSeries,
    Values,
    host_reader,
)
from .writer import SYSTEM_ROLE

__all__ = ["NODE_RANK_VARS", "Sampler", "node_rank", "end_sampling", "sampler_for", "start_sampler", "stop_all"]

log = logging.getLogger("tracking_core.system_metrics")

#: The role of the sampler's writer.
#: Where a node rank comes from, in order: torchrun's node rank, Lightning's and others', SLURM's.
NODE_RANK_VARS = ("GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
#: The last sample at exit is taken when at least this long (or the interval) has passed.
LAST_SAMPLE_AFTER = 1.0
#: Beside the node's lock: touched when the run's primary finishes (see :func:`end_sampling`).
OVER_FILE = "system-metrics.over"


# -- the node ----------------------------------------------------------------------------------
def host_key(host: str | None = None) -> str:
    """The host name as it appears in series names, config keys and the lock file's name."""
    return path_part(host or socket.gethostname(), "host name")


def node_rank(env: Mapping[str, str] = os.environ) -> tuple[int, str] | None:
    """The node's rank and the variable it came from, where a launcher sets one."""
    for name in NODE_RANK_VARS:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value), name
    return None


class Sampler:
    """This process's part in its node's system metrics for one run: sampling (it holds the
    node's lock) or standing by to take over. Never raises into its caller."""

    def __init__(
        self, handle: RunHandle, attach: Callable[..., Any], interval: float, lock: Path, args: Any, tracking_dir: Any
    ) -> None:
        self.handle = handle
        self._attach = attach
        self.interval = interval
        self.lock = lock
        self.host = host_key()
        self.prefix = f"{SYSTEM_ROLE}/{self.host}/"
        self.axis = f"{self.prefix}sample"
        self.samples = 0  # taken by this process
        self.step = 0  # the next sample's number on the node
        self.node_rank: tuple[int, str] | None = None  # the node's, as its first sampler recorded it
        self.cpu_seconds = 0.0  # this thread's CPU time in samples (reading and logging)
        self.start_cpu_seconds = 0.0  # ... in becoming the sampler (its writer, the node's facts)
        self.run: Any = None
        self._args = args
        self._tracking_dir = tracking_dir
        self._fd: int | None = None
        self._stop = threading.Event()
        self._warn = WarnOnce(log)
        self._host: HostSeries | None = None
        self._gpus: Gpus | None = None
        self._last = 0.0
        self._created = time.time()
        self._finish_timeout: float | None = None
        self._thread = threading.Thread(target=self._main, name=f"tracking-core-system-{handle.run_id}", daemon=True)

    @property
    def sampling(self) -> bool:
        """Whether this process holds the node's lock (it samples)."""
        return self._fd is not None

    def start(self, claimed: int | None) -> None:
        self._fd = claimed
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop: a last sample, the writer finished (within ``timeout``; default the exit
        timeout), the lock let go. Waits for that up to ``timeout`` and a little."""
        if timeout is not None:
            self._finish_timeout = timeout
        self._stop.set()
        with _registry:
            if _samplers.get(self.handle.run_id) is self:
                del _samplers[self.handle.run_id]
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join((settings.exit_timeout() if timeout is None else timeout) + 2.0)

    # -- the thread ----------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - a daemon thread: nothing may escape it
            self._warn("sampler", "system metrics stopped on %s (%s: %s); training goes on", self.host, type(exc).__name__, exc)
        finally:
            self._end()

    def _loop(self) -> None:
        while self._fd is None:  # standing by
            if self._stop.wait(self.interval) or self._over():
                return
            self._fd = _claim(self.lock)
            if self._fd is not None:
                log.info("tracking-core: this process (pid %d) takes over %s's system metrics", os.getpid(), self.host)
        if not self._begin():
            return
        due = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            if self._over():
                return  # the primary finished the run on this node: no sample after its close
            self._sample()
            due += self.interval
            due = max(due, time.monotonic())  # after a stall (suspended process): no burst
        if time.monotonic() - self._last >= min(LAST_SAMPLE_AFTER, self.interval):
            self._sample()

    def _begin(self) -> bool:
        """Become the node's sampler: readers, writer, the node's facts in its config."""
        begun = time.thread_time()
        self.step, recorded = _read_state(self.lock)
        self.node_rank = recorded or node_rank()
        _write_state(self.lock, self.step, self.node_rank)
        reader, why_not = host_reader()
        if reader is not None:
            self._host = HostSeries(reader, self.lock.parent)
        self._gpus, no_gpu = Gpus.open()
        if self._host is None and self._gpus is None:
            log.info("tracking-core: no system metrics on %s: %s, and %s", self.host, why_not, no_gpu)
            return False
        # The writer's pump and delivery wake once per sample (each sample is flushed at once),
        # not every half second: at 10 s an idle writer's polling would cost more than sampling.
        self.run = self._attach(
            self.handle,
            role=SYSTEM_ROLE,
            args=self._args,
            writer=True,
            collect=False,
            metric_prefix="",
            flush_interval=max(settings.DEFAULT_FLUSH_INTERVAL, self.interval),
            tracking_dir=self._tracking_dir,
        )
        self._last = time.monotonic()
        facts = self._facts()
        self.run.log_config({f"{self.host}/{k}": v for k, v in facts.items()}, role=SYSTEM_ROLE, namespace=f"{SYSTEM_ROLE}-{self.host}")
        log.info(
            "tracking-core: %s's system metrics every %g s as %s... (sample %d on; %s)%s",
            self.host,
            self.interval,
            self.prefix,
            self.step,
            f"node rank {facts['node_rank']} from ${facts['node_rank_from']}" if "node_rank" in facts else "no node rank known",
            "" if self._gpus is not None else f"; host series only: {no_gpu}",
        )
        if self._host is None:
            log.info("tracking-core: %s: GPU series only: %s", self.host, why_not)
        self.start_cpu_seconds = time.thread_time() - begun
        return True

    def _facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"host": socket.gethostname(), "interval_s": self.interval}
        if self.node_rank is not None:
            facts["node_rank"], facts["node_rank_from"] = self.node_rank
        if self._host is not None:
            facts.update(self._host.facts())
        if self._gpus is not None:
            facts.update(self._gpus.facts())
        else:
            facts["gpus"] = 0
        return facts

    def _sample(self) -> None:
        began = time.thread_time()
        values: Values = {}
        for what, part in self._host.parts() if self._host is not None else ():
            try:
                values.update(part())
            except Exception as exc:  # noqa: BLE001 - one part's failure leaves the others
                self._failed(what, exc)
        if self._gpus is not None:
            values.update(self._gpus.read(self._failed))
        if values and self._writable():
            self.run.log_metrics({self.prefix + k: v for k, v in values.items()}, step=self.step, step_key=self.axis)
            self.run.flush(timeout=0)  # journaled now and its delivery woken; nothing waited for
        self.step += 1
        self.samples += 1
        self._last = time.monotonic()
        _write_state(self.lock, self.step, self.node_rank)
        self.cpu_seconds += time.thread_time() - began

    def _over(self) -> bool:
        """The run's primary finished it since this sampler was made (:func:`end_sampling`)."""
        try:
            return os.stat(self.lock.parent / OVER_FILE).st_mtime >= self._created
        except OSError:
            return False

    def _writable(self) -> bool:
        """The writer is open: not finished by someone else (a SIGTERM handler, exit hooks)."""
        run = self.run
        return run is not None and run.finished is None and getattr(run, "_state", None) is None

    def _end(self) -> None:
        try:
            if self.run is not None and self._writable():
                self.run.finish(timeout=self._finish_timeout if self._finish_timeout is not None else settings.exit_timeout())
        except Exception as exc:  # noqa: BLE001
            self._warn("finish", "system metrics of %s: finishing its writer failed (%s)", self.host, exc)
        finally:
            if self._gpus is not None:
                self._gpus.close()
            if self._fd is not None:
                close_quietly(self._fd)  # the lock goes: a process standing by may take over
                self._fd = None

    def _failed(self, what: str, exc: BaseException) -> None:
        self._warn(
            f"part-{what}",
            "system metrics of %s: reading %s failed (%s: %s); left out of this sample and tried "
            "again at the next (said once)",
            self.host,
            what,
            type(exc).__name__,
            exc,
        )

    def forked(self) -> None:
        """In a child right after fork: the lock stays the parent's (the child closes its copy
        of the descriptor), and the child has no sampler thread."""
        if self._fd is not None:
            close_quietly(self._fd)
            self._fd = None
        self._stop.set()


# -- the lock ------------------------------------------------------------------------------------
def lock_path(local_dir: str | os.PathLike[str], run_id: str, host: str | None = None) -> Path:
    """The node's lock for the run's system metrics, in the process's own tracking directory."""
    return Path(local_dir) / "runs" / path_part(run_id, "run id") / f"system-metrics-{host_key(host)}.lock"


def _claim(path: Path) -> int | None:
    """An open descriptor that holds the node's lock ``path``, or None when a live process
    holds it. On Linux: a Unix socket bound to an abstract name made of the file's full path
    (bound by one process at a time, gone with it, and no file a cleaner can delete); elsewhere
    an exclusive ``flock`` on the file. ``OSError`` when neither can be tried."""
    if sys.platform.startswith("linux"):
        where = os.path.join(os.path.realpath(path.parent), path.name)
        name = b"\0tracking-core/" + hashlib.sha256(where.encode()).hexdigest().encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(name)
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            return None
        return sock.detach()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        close_quietly(fd)
        return None
    return fd


def _read_state(path: Path) -> tuple[int, tuple[int, str] | None]:
    """What the node's last sampler of the run left in its lock file: the next sample number
    (0: none yet) and the node's rank as recorded (None: none)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, ValueError):
        return 0, None
    step = int(lines[0]) if lines and lines[0].strip().isdigit() else 0
    rank = lines[2].split() if len(lines) > 2 else []
    return step, (int(rank[0]), rank[1]) if len(rank) == 2 and rank[0].isdigit() else None


def _write_state(path: Path, step: int, rank: tuple[int, str] | None) -> None:
    """The sampler's state, written in place (the same file, which a ``flock`` may be on), and
    the file made again when it was deleted."""
    data = f"{step}\n{os.getpid()}\n{'' if rank is None else f'{rank[0]} {rank[1]}'}\n".encode()
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


# -- this process's samplers -----------------------------------------------------------------
_samplers: dict[str, Sampler] = {}
_registry = threading.Lock()
_hooked = False


def start_sampler(handle: RunHandle, attach: Callable[..., Any], *, args: Any = None, tracking_dir: Any = None) -> Sampler | None:
    """This process's part in the node's system metrics for ``handle``'s run, when they are
    asked for (``--tracking-system-metrics`` on ``args``, else ``$TRACKING_CORE_SYSTEM_METRICS``);
    None when they are not, or cannot be (said once). The caller's thread opens a file and starts
    a thread, nothing more: the sampler's writer opens on the sampler's thread. Called by
    ``start_run`` and ``attach`` (which it uses to attach the node's writer, role ``system``); a second call for the same run in one process returns the
    first's sampler. Never raises."""
    try:
        interval = opts.system_metrics_interval(args)
        if interval is None:
            return None
        return _start(handle, attach, interval, args, tracking_dir)
    except Exception as exc:  # noqa: BLE001 - never raise into the host
        log.warning("tracking-core: no system metrics (%s: %s); training goes on", type(exc).__name__, exc)
        return None


def _start(handle: RunHandle, attach: Callable[..., Any], interval: float, args: Any, tracking_dir: Any) -> Sampler | None:
    with _registry:
        known = _samplers.get(handle.run_id)
        if known is not None:
            return known
        path = lock_path(local_tracking_dir(handle, args, tracking_dir), handle.run_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            claimed = _claim(path)
        except OSError as exc:
            log.warning(
                "tracking-core: no system metrics from this process: cannot lock %s (%s); point "
                "$%s or --tracking-dir at a writable directory",
                path,
                exc.strerror or exc,
                settings.DIR,
            )
            return None
        sampler = Sampler(handle, attach, interval, path, args, tracking_dir)
        _samplers[handle.run_id] = sampler
        _hook()
    sampler.start(claimed)
    return sampler


def end_sampling(handle: RunHandle, tracking_dir: Any, timeout: float) -> None:
    """The run's primary finishes it: the node's sampling of the run ends first, so that its
    last samples come before the close. This process's sampler takes its last sample and
    finishes its writer within ``timeout``; every other process of the node (sampling or
    standing by, in the same tracking directory) stops at its next tick, without a sample after
    the close. A sampler made later (the run resumed) samples again. Never raises."""
    try:
        sampler = _samplers.get(handle.run_id)
        folder = sampler.lock.parent if sampler is not None else lock_path(local_tracking_dir(handle, None, tracking_dir), handle.run_id).parent
        if any(folder.glob("system-metrics-*.lock")):  # sampled here: say the run is over
            (folder / OVER_FILE).touch()
        if sampler is not None:
            sampler.stop(timeout)
    except Exception as exc:  # noqa: BLE001 - the run's finish goes on
        log.debug("tracking-core: ending the node's system metrics: %s", exc)


def sampler_for(run_id: str) -> Sampler | None:
    """This process's sampler (sampling or standing by) for the run, if it has one."""
    return _samplers.get(run_id)


def stop_all(timeout: float | None = None) -> None:
    """Stop this process's samplers (at exit: before the exit hooks finish the runs)."""
    for sampler in list(_samplers.values()):
        sampler.stop(timeout)


def _after_fork() -> None:
    for sampler in _samplers.values():
        sampler.forked()
    _samplers.clear()


def _hook() -> None:
    """Stop the samplers when the interpreter exits, before ``atexit`` hooks run (threading's
    own exit hooks come first), so that a sampler never logs into a run the exit hooks finished."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError("no threading._register_atexit")
        register(stop_all)
    except RuntimeError:
        atexit.register(stop_all)
    os.register_at_fork(after_in_child=_after_fork)
