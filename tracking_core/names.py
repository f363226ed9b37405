"""Names are data, never paths: the one mapping from a name to a file or folder name.

Every name a user or a host passes -- a role, the run's id and name, a config namespace, a
metric, table, text or artifact name -- ends up in a file or folder name somewhere (the journal
folder ``<role>-r0-p<pid>``, the jsonl file ``<role>.jsonl``, ``config/<namespace>.json``, an
artifact's copy, a W&B table's media file). A name is data: whatever it holds (``..``, ``/``,
``\\``, an absolute path, NUL and other control characters, nothing, 300 characters), what is
derived from it stays inside the folder it was meant for. Trackers that take a name as data
(MLflow and W&B keys, the ``actor/`` prefix of config keys) keep getting it as given; only the
file names change.

**The rule** (:func:`path_part`). A name is used as given when it is a plain file name: 1 to
:data:`MAX_PART_BYTES` bytes of UTF-8, none of ``/ \\ : * ? " < > | ~`` and no control
character, not starting with ``.`` (so never ``.``, ``..`` or a hidden file). Any other name
becomes its characters with those replaced by ``_`` (a leading ``.`` too), cut to
:data:`READABLE_BYTES` bytes, then ``~`` and the first 8 hex digits of the SHA-256 of the
name as given: ``../../x`` -> ``_.._.._x~5bfa9d21``.

Why it cannot collide: a name kept as given holds no ``~``, and every mapped name does, so a
mapped name is never one used as given; two mapped names are the same only when their
readable parts and their hashes are (two distinct names whose SHA-256 share 32 leading bits).
The mapping is pure: every process of a job, and ``tracking-core sync`` later, gets the same
file names for the same names, whoever came first. A name that is mapped is named in one
warning per process, saying what it became.

:func:`path_under` is the same rule for a name whose ``/`` makes folders (an artifact name
``ckpt/step-10``, a W&B table key ``actor/samples``): each part separately, so ``a/../../b``
-> ``a/_~<hash of "..">/_~<hash of "..">/b``; a name over :data:`MAX_PATH_BYTES` becomes one part.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import unicodedata

__all__ = ["MAX_PART_BYTES", "MAX_PATH_BYTES", "MARK", "path_part", "path_under"]

log = logging.getLogger("tracking_core.names")

#: The longest name (UTF-8 bytes) used as given: a backend adds its own decoration around it
#: (``offline-run-<time>-<id>-<label>``, ``<key>_<step>_<hash>.table.json``) and a file name
#: holds at most 255 bytes.
MAX_PART_BYTES = 128
#: The longest name, ``/`` included, that :func:`path_under` maps part by part.
MAX_PATH_BYTES = 512
#: How many bytes (UTF-8) of a mapped name are kept readable before the hash.
READABLE_BYTES = 64
#: What a mapped name holds and a name used as given never does.
MARK = "~"
_HASH_CHARS = 8

_UNSAFE = re.compile(r'[/\\:*?"<>|~\x00-\x1f\x7f]')
#: Names already said to be mapped in this process: one warning each.
_said: set[str] = set()


def _hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]


def _printable(ch: str) -> bool:
    """Not a control, format, surrogate or unassigned character (shown as nothing or garbage)."""
    return not unicodedata.category(ch).startswith("C")


def _plain(name: str) -> bool:
    """Whether ``name`` is used as a file name as given (the module's rule)."""
    if not name or name.startswith(".") or _UNSAFE.search(name):
        return False
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return size <= MAX_PART_BYTES and all(_printable(ch) for ch in name)


def _mapped(name: str) -> str:
    readable = "".join(ch if _printable(ch) else "_" for ch in _UNSAFE.sub("_", name))
    if readable.startswith("."):
        readable = "_" + readable[1:]
    cut = readable.encode("utf-8")[:READABLE_BYTES].decode("utf-8", "ignore")
    return f"{cut or '_'}{MARK}{_hash(name)}"


def _say(name: str, mapped: str, what: str) -> None:
    if name in _said:
        return
    _said.add(name)
    log.warning(
        "tracking-core: the %s %.120r is not usable as a file or folder name; %r is used in file "
        "names instead (names empty, starting with '.', holding '/', '\\', ':', '~' or a control "
        "character, or over %d bytes, are mapped so, alike in every process)",
        what,
        name,
        mapped,
        MAX_PART_BYTES,
    )


def path_part(name: object, what: str = "name", *, warn: bool = True) -> str:
    """``name`` as one file or folder name (the module's rule); ``what`` says what the name is
    (``role``, ``config namespace``) in the one warning a mapped name gets. ``warn=False`` for
    a lookup (a name the user typed, which may be a path and is tried as one too): nothing is
    said, since nothing is named."""
    text = name if isinstance(name, str) else str(name)
    mapped = _part(text)
    if warn and mapped != text:
        _say(text, mapped, what)
    return mapped


def path_under(name: object, what: str = "name") -> str:
    """``name`` as a relative path whose ``/`` makes folders: every part by :func:`path_part`'s
    rule, so that the path stays under the folder it is joined to; a name over
    :data:`MAX_PATH_BYTES` bytes becomes a single part."""
    text = name if isinstance(name, str) else str(name)
    mapped = _under(text)
    if mapped != text:
        _say(text, mapped, what)
    return mapped


# Cached: a backend asks for the same role's folder with every record it writes.
@functools.lru_cache(maxsize=4096)
def _part(text: str) -> str:
    return text if _plain(text) else _mapped(text)


@functools.lru_cache(maxsize=4096)
def _under(text: str) -> str:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return _mapped(text)
    parts = text.split("/")
    if all(_plain(p) for p in parts):
        return text
    return "/".join(p if _plain(p) else _mapped(p) for p in parts)
