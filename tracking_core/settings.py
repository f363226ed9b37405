"""Every ``TRACKING_CORE_*`` environment variable, read in one place.

Each is read when it is needed (not at import), so a process that sets one before starting a
run is heard. The README's settings table lists the same names.
"""

from __future__ import annotations

import logging
import os

from .errors import WarnOnce

log = logging.getLogger("tracking_core.settings")

BACKENDS = "TRACKING_CORE_BACKENDS"
DIR = "TRACKING_CORE_DIR"
KEY_STYLE = "TRACKING_CORE_KEY_STYLE"
RUN = "TRACKING_CORE_RUN"
RUN_ID = "TRACKING_CORE_RUN_ID"
DELIVERY = "TRACKING_CORE_DELIVERY"
EXIT_TIMEOUT = "TRACKING_CORE_EXIT_TIMEOUT"
SEGMENT_BYTES = "TRACKING_CORE_SEGMENT_BYTES"
QUEUE_RECORDS = "TRACKING_CORE_QUEUE_RECORDS"
WRITER = "TRACKING_CORE_WRITER"
DISABLE_PLUGINS = "TRACKING_CORE_DISABLE_PLUGINS"
TRACE_PLUGINS = "TRACKING_CORE_TRACE_PLUGINS"
SECRET_PATTERNS = "TRACKING_CORE_SECRET_PATTERNS"
SECRET_KEYS = "TRACKING_CORE_SECRET_KEYS"
ALLOW_KEYS = "TRACKING_CORE_ALLOW_KEYS"
REDACT_TEXT = "TRACKING_CORE_REDACT_TEXT"
CONSOLE_INTERVAL = "TRACKING_CORE_CONSOLE_INTERVAL"
WRITER_HEARTBEAT = "TRACKING_CORE_WRITER_HEARTBEAT"
SYSTEM_METRICS = "TRACKING_CORE_SYSTEM_METRICS"
QUIET = "TRACKING_CORE_QUIET"
REDUCE_WAIT = "TRACKING_CORE_REDUCE_WAIT"

#: name -> what it does, for ``tracking-core --help`` and the settings table of the docs
#: (:data:`ALL` adds each installed host adapter's variable).
CORE = {
    BACKENDS: "trackers to log to, comma-separated (like --tracking-backends)",
    DIR: "where local run data goes (like --tracking-dir; default ./tracking-runs)",
    KEY_STYLE: "config key style: default or slime (like --tracking-key-style)",
    RUN: "the run handle a process attaches with (set by start_run for child processes)",
    RUN_ID: "the job's run id, the same in every process of the job: start_run uses it, attach finds the run by it without a handle",
    DELIVERY: "process (default) or thread: where the trackers' client code runs",
    EXIT_TIMEOUT: "seconds an exiting or orphaned writer spends delivering (default 30)",
    SEGMENT_BYTES: "journal segment size in bytes (default 8 MiB)",
    QUEUE_RECORDS: "log calls that may wait in memory for the journal before a call journals them itself (default 10000)",
    WRITER: "1/0: force this process to be (or not be) its role's writer",
    DISABLE_PLUGINS: "plugins not to load, comma-separated entry-point names",
    TRACE_PLUGINS: "1: trace every hook call to the tracking_core.trace logger",
    SECRET_PATTERNS: "extra value patterns to redact (regexes, comma-separated)",
    SECRET_KEYS: "extra key names to treat as secrets",
    ALLOW_KEYS: "key names never to treat as secrets",
    REDACT_TEXT: "0: do not redact secret-shaped strings in table cells and texts (default 1)",
    CONSOLE_INTERVAL: "seconds between the console backend's views (like --console-interval; default 5)",
    WRITER_HEARTBEAT: "seconds between a writer's published states while it writes (default 5; 0: none between its start and end)",
    SYSTEM_METRICS: "1/0 or seconds: one process per node samples CPU, memory, disk, network and GPUs (like --tracking-system-metrics; default off, every 10 s when on, at most 86400 s)",
    QUIET: "1: the primary does not say where the run goes when it starts, nor its summary when everything arrived (like --tracking-quiet; an incomplete delivery is still said)",
    REDUCE_WAIT: "seconds a role's writer waits for its other ranks' reduced values of a step after the first arrives (default 5)",
}



def host_settings() -> dict[str, str]:
    """The variable of each installed host adapter (``TRACKING_CORE_<HOST>``, from the
    ``tracking_core.hosts`` entry points), with what it does."""
    from .integrations.import_hook import host_variable, installed_hosts

    return {
        host_variable(host): f"1: route {host}'s tracking through tracking-core in every process (set by {module})"
        for host, module in installed_hosts().items()
    }


def __getattr__(name: str) -> dict[str, str]:
    # ``ALL``: every setting, name -> what it does; the hosts' read from their entry points
    # when asked (not at import: reading entry points costs tens of milliseconds).
    if name == "ALL":
        return {**CORE, **host_settings()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_EXIT_TIMEOUT = 30.0
#: How often a run's pump journals what was logged (``flush_interval`` of start_run and attach).
DEFAULT_FLUSH_INTERVAL = 0.5
#: Where local run data goes when nothing else says (relative to the working directory).
DEFAULT_TRACKING_DIR = "tracking-runs"
DEFAULT_SEGMENT_BYTES = 8 << 20
DEFAULT_QUEUE_RECORDS = 10_000
DEFAULT_WRITER_HEARTBEAT = 5.0
DEFAULT_SYSTEM_INTERVAL = 10.0
DEFAULT_REDUCE_WAIT = 5.0
#: The shortest interval between system samples taken as given.
MIN_SYSTEM_INTERVAL = 0.1
#: The longest (a day): a longer one is taken as this, with a warning.
MAX_SYSTEM_INTERVAL = 86400.0


def get(name: str) -> str | None:
    """The variable's value, stripped; None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def _number(name: str, default: float, minimum: float) -> float:
    text = get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        log.warning("$%s=%r is not a number; using %s", name, text, default)
        return default
    return max(minimum, value)


def exit_timeout() -> float:
    return _number(EXIT_TIMEOUT, DEFAULT_EXIT_TIMEOUT, 0.0)


def segment_bytes() -> int:
    return int(_number(SEGMENT_BYTES, DEFAULT_SEGMENT_BYTES, 4096))


def queue_records() -> int:
    return int(_number(QUEUE_RECORDS, DEFAULT_QUEUE_RECORDS, 64))


def writer_heartbeat() -> float:
    """Seconds between a writer's heartbeats in the job's writer registry (0: none)."""
    return _number(WRITER_HEARTBEAT, DEFAULT_WRITER_HEARTBEAT, 0.0)


def reduce_wait() -> float:
    """Seconds a writer waits for a step's other ranks after the first one's values arrive."""
    return _number(REDUCE_WAIT, DEFAULT_REDUCE_WAIT, 0.0)


def quiet() -> bool:
    """``$TRACKING_CORE_QUIET`` is on (1, true, yes, on)."""
    return (get(QUIET) or "").lower() in _ON


def names(name: str) -> set[str]:
    """A comma-separated variable as a set of names."""
    return {n.strip() for n in (get(name) or "").split(",") if n.strip()}


_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


#: a setting's warning, said once per process however often the setting is read
_warn_once = WarnOnce(log)


def system_interval(text: str | None, source: str = SYSTEM_METRICS) -> float | None:
    """``--tracking-system-metrics`` / ``$TRACKING_CORE_SYSTEM_METRICS`` as seconds between
    samples: ``1``/``true``/``yes``/``on`` the default (10 s), ``0``/``false``/``no``/``off``
    0.0 (off), any other number (``1.0``, ``2.5``, ``30s``) that many seconds, at least
    :data:`MIN_SYSTEM_INTERVAL` and at most :data:`MAX_SYSTEM_INTERVAL` (a longer one is taken
    as that, with a warning). None when ``text`` is unset or empty (the next source decides);
    anything else is off, with a warning naming ``source``. Each warning is said once a process."""
    if text is None or not text.strip():
        return None
    word = text.strip().lower()
    if word in _ON:
        return DEFAULT_SYSTEM_INTERVAL
    if word in _OFF:
        return 0.0
    try:
        seconds = float(word.removesuffix("s"))
    except ValueError:
        seconds = float("nan")
    if not 0.0 <= seconds < float("inf"):  # NaN, negative, infinite
        _warn_once((source, text), "%s=%r is neither 1/0 nor a number of seconds; system metrics are off", source, text)
        return 0.0
    if seconds > MAX_SYSTEM_INTERVAL:
        _warn_once(
            (source, text),
            "%s=%r: %g s between system samples is more than the most taken, %.0f s (a day); "
            "sampling every %.0f s",
            source,
            text,
            seconds,
            MAX_SYSTEM_INTERVAL,
            MAX_SYSTEM_INTERVAL,
        )
        return MAX_SYSTEM_INTERVAL
    return 0.0 if seconds == 0 else max(MIN_SYSTEM_INTERVAL, seconds)
