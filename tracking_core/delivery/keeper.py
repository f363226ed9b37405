"""The keeper: starts a writer's delivery process outside the training process's tree.

:class:`~tracking_core.delivery.client.ProcessDelivery` runs this file by its path
(``python -I -S keeper.py COMMAND...``: the standard library only, so it starts in milliseconds
and holds a few megabytes) in a session of its own. It forks and exits at once (the training
process reaps it); its child, now nobody's child but init's (or the nearest subreaper's), starts
COMMAND, the delivery process, says on stdout ``{"ev": "started", "pid": N, "keeper": K}``,
waits for it, says ``{"ev": "exited", "code": C}`` (``-SIGNAL`` for a signal, as
:class:`subprocess.Popen` does) and exits as it did: with its exit code, or killed by the same
signal. So the training process reads the delivery process's exit status as it would from its own
child (a crash in a tracker's native code is still charged to that tracker), and every process
of the three is reaped.

That way the delivery process is in neither the training process's tree nor its process group.
Launchers end a worker's processes by parentage and group: Ray kills a worker's direct children
and its process group when the worker exits, other launchers walk the tree. None of them reaches
the delivery process, which notices that training is gone, delivers what the journal holds within
the exit timeout and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any, NoReturn


def _exit_as(status: int) -> NoReturn:
    """End this process the way a child with wait status ``status`` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ImportError, ValueError, OSError):
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child dumped core if it was to
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal this process cannot die of: the shell's convention
    os._exit(os.waitstatus_to_exitcode(status))


def _say(event: dict[str, Any]) -> None:
    """One event to the training process (gone already, perhaps: then to no one)."""
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps(event) + "\n").encode())


def _fork_or_exit() -> int:
    try:
        return os.fork()
    except OSError as exc:
        print(f"tracking-core: could not start the delivery process ({exc})", file=sys.stderr)
        os._exit(127)


def main(command: list[str]) -> NoReturn:
    if not command:
        print("usage: keeper.py COMMAND [ARG...]", file=sys.stderr)
        os._exit(2)
    if _fork_or_exit():
        os._exit(0)  # the training process reaps this one; the child is init's from now on
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job's Ctrl-C is training's to handle
    pid = _fork_or_exit()
    if pid == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        except OSError as exc:
            print(f"tracking-core: could not start {command[0]} ({exc})", file=sys.stderr)
        os._exit(127)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the requests are the delivery process's alone
    os.close(null)
    _say({"ev": "started", "pid": pid, "keeper": os.getpid()})
    _, status = os.waitpid(pid, 0)
    _say({"ev": "exited", "code": os.waitstatus_to_exitcode(status)})
    _exit_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
