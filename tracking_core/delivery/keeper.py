"""The keeper: a writer's delivery process one step removed from the training process.

:class:`~tracking_core.delivery.client.ProcessDelivery` runs this file by its path
(``python -I -S keeper.py COMMAND...``: the standard library only, so it starts in milliseconds
and holds a few megabytes) in a session of its own. It starts COMMAND, the delivery process, as
its own child, says the child's pid on stdout (one line, ``{"ev": "started", "pid": N}``), lets
go of the pipes, waits for the child and exits as the child did: with its exit code, or killed
by the same signal. The training process therefore reads the delivery process's exit status
from the keeper as it would from the delivery process itself (a crash in a tracker's native
code is still charged to that tracker), and the keeper reaps the delivery process: no zombie.

The delivery process is then neither the training process's child nor in its process group.
Launchers end a worker's processes by parentage and group: Ray kills a worker's direct
children when the worker exits, and its process group. They reach the keeper; the delivery
process, a grandchild in a session of its own, outlives them, notices that training is gone and
delivers what the journal holds within the exit timeout, then exits (its parent gone, it is
reaped by init or the nearest subreaper).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import NoReturn


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


def _let_go_of(fd: int) -> None:
    """Point ``fd`` at /dev/null: only the delivery process holds the pipe now."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, fd)
    os.close(null)


def main(command: list[str]) -> NoReturn:
    if not command:
        print("usage: keeper.py COMMAND [ARG...]", file=sys.stderr)
        os._exit(2)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job's Ctrl-C is training's to handle
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"tracking-core: could not start the delivery process ({exc})", file=sys.stderr)
        os._exit(127)
    if pid == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        except OSError as exc:
            print(f"tracking-core: could not start {command[0]} ({exc})", file=sys.stderr)
        os._exit(127)
    _let_go_of(0)
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps({"ev": "started", "pid": pid}) + "\n").encode())
    _let_go_of(1)
    _, status = os.waitpid(pid, 0)
    _exit_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
