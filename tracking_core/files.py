"""Files written whole: a reader never sees one half-written, however many write it at once."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: into a hidden temporary file beside it, named for
    this process and thread (two writers never share one), then renamed over ``path``. Raises
    ``OSError`` as writing does, and then leaves no temporary file behind."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def close_quietly(fd: int) -> None:
    """Close a descriptor that may already be gone (its process forked, its file deleted):
    nothing of ours depends on the close succeeding."""
    with contextlib.suppress(OSError):
        os.close(fd)
