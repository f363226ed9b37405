"""Who attached to a run, told where every rank of the job can read it: the job's c10d store.

The writer registry (:mod:`tracking_core.delivery.writers`) learns of a writer only once the
writer's delivery reaches the tracker: a node cut off from the tracker from its start would go
unnamed, and a role whose ranks all attached as non-writers (one world split into roles, the
world's rank 0 in another role) would end without a word. So every process that attaches where
``torch.distributed`` is initialised says so at once — role, rank, writer or not, host, label,
tracking directory, redacted and bounded — by one ``append`` to the job's default store: no
collective, on a thread of its own, never waited for, never raising.

A finishing primary reads that roll (:func:`take_roll`, bounded) and keeps it in its run folder.
Its summary names each role whose ranks attached with no writer among them
(:func:`unwritten_roles`); its delivery (:func:`await_writers`) waits, within the finish timeout,
for each announced writer the registry has not heard of, and names those it never hears of as
owing data, so the run closes FAILED as for any writer that owes data.

A non-writer chosen by the world rule (:attr:`tracking_core.writer.WriterDecision.by_world`)
watches the roll for a while: once the world's rank 0 has attached with another role and no
writer of its own role has, it warns.

Where there is no ``torch.distributed`` store (Ray actors, processes started on their own),
nothing is announced: the registry alone knows the job's writers, once they reach the tracker.

Every thread of this package that calls the store starts through :func:`store_thread`: at the
interpreter's exit it is told to stop and waited for (at most :data:`EXIT_BOUND` seconds), before
the exit hooks run. A daemon thread still inside a store call when the interpreter finalises
aborts the process ("terminate called without an active exception", SIGABRT): a training job
that ended well would exit failed.
"""

from __future__ import annotations

import atexit
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .delivery import writers
from .delivery.writers import UNHEARD
from .files import replace_text
from .handle import run_folder
from .views import sync_command
from .writer import SYSTEM_ROLE, WriterDecision

log = logging.getLogger("tracking_core.attendance")

#: The roll's key in the job's store: one per run, one line per attached process.
KEY = "tracking_core/attended/{run_id}"
#: Where a finishing primary keeps the roll for its delivery (in its run folder).
ROLL_FILE = "attended.json"
#: The most characters of one field of an announcement: the roll grows with the ranks only.
MAX_FIELD = 400
#: The longest a finishing primary reads the store (seconds): a store that is gone costs this.
READ_BOUND = 5.0
#: How long a non-writer watches the roll for its role's writer (seconds), and how long it
#: still waits for one after the world's rank 0 attached with another role.
WATCH, GRACE = 60.0, 2.0
POLL = 0.5
#: Hosts named in one role's line, at most.
MAX_HOSTS = 4
#: The longest the interpreter's exit waits for this package's store threads (seconds).
EXIT_BOUND = 2.0

#: Set at the interpreter's exit: a store thread makes no further store call.
stopping = threading.Event()
_threads: list[threading.Thread] = []


def store_thread(target: Callable[..., None], args: tuple[Any, ...], name: str) -> threading.Thread:
    """Start a daemon thread that calls the job's store; it is waited for at the interpreter's
    exit (see the module's docstring) and must make no store call once :data:`stopping` is set."""
    if not _threads:
        try:  # threading's exit hooks run before atexit's, while every thread still can
            threading._register_atexit(_quiesce)  # type: ignore[attr-defined]
        except (AttributeError, RuntimeError):  # another Python, or already exiting
            atexit.register(_quiesce)
    _threads[:] = [t for t in _threads if t.is_alive()]
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    _threads.append(thread)
    thread.start()
    return thread


def _quiesce() -> None:
    stopping.set()
    deadline = time.monotonic() + EXIT_BOUND
    for thread in _threads:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def _store() -> Any | None:
    """The job's default c10d store, or None (no initialised ``torch.distributed``)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # noqa: BLE001 - a torch without it: nothing is announced
        return None


def _line(role: str, decision: WriterDecision, label: str | None, tracking_dir: str | None) -> str:
    from .config import redact

    entry = {
        "role": role,
        "rank": decision.rank,
        "writer": decision.writer,
        "host": socket.gethostname(),
        "label": label,
        "tracking_dir": tracking_dir,
    }
    clipped = {k: v[:MAX_FIELD] if isinstance(v, str) else v for k, v in redact(entry)[0].items()}
    return json.dumps(clipped, separators=(",", ":")) + "\n"


def _parse(data: bytes) -> list[dict[str, Any]]:
    roll = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            roll.append(entry)
    return roll


def announce(
    run_id: str, role: str, decision: WriterDecision, *, label: str | None = None, tracking_dir: str | None = None
) -> threading.Thread | None:
    """Say in the job's store that this process attached (a writer with its ``label`` and
    tracking directory), on a thread of its own; None where there is no store."""
    store = _store()
    if store is None:
        return None
    return store_thread(_announce, (store, run_id, role, decision, (label, tracking_dir)), "tracking-core-attendance")


def _announce(store: Any, run_id: str, role: str, decision: WriterDecision, where: tuple[str | None, str | None]) -> None:
    """The roll's line; besides it, two small keys a watching non-writer checks (never the
    whole roll): that ``role`` has a writer, and the role the world's rank 0 attached with."""
    key = KEY.format(run_id=run_id)
    try:
        store.append(key, _line(role, decision, *where).encode())
        if decision.writer:
            store.set(f"{key}/writer/{role}", b"1")
        if decision.rank == 0 and role != SYSTEM_ROLE:
            store.compare_set(f"{key}/rank0", b"", role.encode())  # the first role it attached with
        if decision.by_world and not decision.writer:
            _watch(store, key, role, decision.rank)
    except Exception as exc:  # noqa: BLE001 - a store gone: the registry still knows the writers it hears
        log.debug("tracking-core could not use the job's store for role %r (%s: %s)", role, type(exc).__name__, exc)


def _watch(store: Any, key: str, role: str, rank: int | None) -> None:
    """Warn once the world's rank 0 has attached with another role and, :data:`GRACE` seconds
    later, no writer of ``role`` has attached: what this role logs goes nowhere."""
    deadline = time.monotonic() + WATCH
    other_since: float | None = None
    writer, first = f"{key}/writer/{role}", f"{key}/rank0"
    while time.monotonic() < deadline and not stopping.is_set():
        if store.check([writer]):
            return
        if other_since is None and store.check([first]) and store.get(first).decode() != role:
            other_since = time.monotonic()
        if other_since is not None and time.monotonic() - other_since >= GRACE:
            log.warning(
                "tracking-core: role %r has no writer among its ranks: this process (torch.distributed "
                "rank %s on host %s) is not its writer, and the world's rank 0, which would be, "
                "attached as %r; what role %r logs is NOT logged. Name the role's ranks: "
                "attach(role=%r, group=torch.distributed.new_group(<the role's ranks>)) (docs/distributed.md)",
                role, rank, socket.gethostname(), store.get(first).decode(), role, role,
            )  # fmt: skip
            return
        stopping.wait(POLL)


# -- a finishing primary's side ------------------------------------------------------------------


def take_roll(run_id: str, tracking_dir: str | Path, bound: float = READ_BOUND) -> list[dict[str, Any]]:
    """The job's roll for ``run_id`` from its store, read within ``bound`` seconds ([] without a
    store, or past the bound), kept in the run folder for this primary's delivery (an older
    one removed). Never raises."""
    store, key = _store(), KEY.format(run_id=run_id)
    found: list[list[dict[str, Any]]] = []
    if store is not None:

        def read() -> None:
            try:
                if store.check([key]):
                    found.append(_parse(store.get(key)))
            except Exception as exc:  # noqa: BLE001 - no roll: the registry alone judges
                log.debug("tracking-core could not read the job's store (%s: %s)", type(exc).__name__, exc)

        store_thread(read, (), "tracking-core-roll").join(bound)
    roll = found[0] if found else []
    path = run_folder(Path(tracking_dir), run_id) / ROLL_FILE
    try:
        if roll:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_text(path, json.dumps(roll))
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:  # no roll and no folder for one (an unusable tracking dir): nothing to say
        if roll:
            log.warning(
                "tracking-core could not keep the job's roll in %s (%s: %s): the writers it announced "
                "are judged by the tracker's registry alone", path, type(exc).__name__, exc,
            )  # fmt: skip
    return roll


def unwritten_roles(roll: list[dict[str, Any]]) -> dict[str, str]:
    """Each role of the roll with processes attached and no writer among them -> one line that
    says so, where, and what to do."""
    from .distributed import ranges

    by_role: dict[str, list[dict[str, Any]]] = {}
    for entry in roll:
        by_role.setdefault(str(entry.get("role")), []).append(entry)
    lines = {}
    for role, entries in sorted(by_role.items()):
        if any(e.get("writer") for e in entries):
            continue
        ranks = ranges(e["rank"] for e in entries if isinstance(e.get("rank"), int))
        hosts = sorted({str(e.get("host")) for e in entries})
        where = ", ".join(hosts[:MAX_HOSTS]) + (f" and {len(hosts) - MAX_HOSTS} more" if len(hosts) > MAX_HOSTS else "")
        lines[role] = (
            f"role {role}: {len(entries)} process(es) attached (ranks {ranks or '?'} on {where}), none of them its "
            f"writer: what they logged was NOT logged; name the role's ranks with attach(role={role!r}, group=...)"
        )
    return lines


def load_roll(tracking_dir: str | Path, run_id: str) -> list[dict[str, Any]]:
    """The roll :func:`take_roll` kept ([] if none, or unreadable)."""
    try:
        roll = json.loads((run_folder(Path(tracking_dir), run_id) / ROLL_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in roll if isinstance(e, dict)] if isinstance(roll, list) else []


def await_writers(
    read: Callable[[], Mapping[str, Mapping[str, Any]] | None], *, run_id: str, **kwargs: Any
) -> dict[str, dict[str, Any]]:
    """:func:`tracking_core.delivery.writers.await_writers` over the registry, once every writer
    the job's roll announced (other than ``own`` and those handled here) is in it, or at
    ``until``; an announced writer the registry still lacks then is named as owing data."""
    tracking_dir = kwargs["tracking_dir"]
    expected = {
        str(e["label"]): e
        for e in load_roll(tracking_dir, run_id)
        if e.get("writer") and e.get("label") and e["label"] != kwargs.get("own") and not writers.handled_here(e, tracking_dir)
    }  # fmt: skip
    last: list[Mapping[str, Mapping[str, Any]] | None] = [None]

    def reading() -> Mapping[str, Mapping[str, Any]] | None:
        last[0] = read()
        return last[0]

    while expected and not set(expected) <= _heard(reading()) and time.monotonic() < kwargs["until"]:
        if kwargs["stop"].wait(writers.READ_EVERY):
            break
    owing = writers.await_writers(reading, **kwargs)
    if last[0] is None:  # the registry could not be read: it cannot say who it lacks
        return owing
    heard = _heard(last[0])
    for label, entry in expected.items():
        if label not in heard and label not in owing:
            owing[label] = unheard_entry(entry)
    return owing


def _heard(registry: Mapping[str, Mapping[str, Any]] | None) -> set[str]:
    """The labels the registry knows (its keys, and the labels its states give)."""
    found = set(registry or {})
    found.update(str(s.get("label")) for s in (registry or {}).values() if isinstance(s, Mapping))
    return found


def unheard_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An announced writer the registry never heard of, as the summary and the run name a
    writer that owes data (how much it logged is known on its host only)."""
    where = str(entry.get("tracking_dir") or "<its tracking directory>")
    return {
        **{k: entry.get(k) for k in ("label", "role", "rank", "host")},
        "state": UNHEARD,
        "journaled": 0,
        "delivered": 0,
        "owed": 0,
        "last_heard": None,
        "sync": sync_command(where),
    }
