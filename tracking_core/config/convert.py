"""Host config objects to plain JSON data, recording every conversion that loses something.

A training job's ``args`` holds whatever its parsers and plugins put there: enums, dtypes, paths,
callables, tensors, tuples, sets, half-built objects. Trackers accept a handful of JSON types and
fail (or silently stringify) on the rest, so everything goes through :func:`to_plain` first.

What the caller may rely on:

* :func:`to_plain` never raises, whatever the object does (``repr`` that raises, properties that
  raise, self-references, infinite generators, very deep nesting).
* The result holds only ``dict`` (str keys, sorted), ``list``, ``str``, ``int``, ``float`` (finite),
  ``bool`` and ``None``: ``json.dumps(result, allow_nan=False)`` always succeeds.
* Every value whose type or content changed on the way is listed as a :class:`Conversion`, so a
  user can see what became what. No mapping key disappears: keys that collide after conversion to
  text are renamed, and the rename is listed.
* Nothing is imported to recognise a type: torch, numpy, OmegaConf and pydantic objects are
  recognised by their shape and module name (OmegaConf is used only when already imported).

Paths (in conversions and in redaction reports) name a value inside the converted data: mapping
keys joined by ``.``, list items as ``[i]``, e.g. ``eval_datasets[0].name``; the root is ``""``.
Items of a set have no stable index before sorting and share the path ``<set>[*]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import inspect
import json
import math
import os
import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

__all__ = ["Conversion", "to_plain", "child_path", "index_path", "type_name", "MAX_DEPTH"]

#: Deeper nesting than this is cut with a marker (a guard against runaway recursion).
MAX_DEPTH = 64
#: Longest ``repr`` kept for an object that has no better plain form.
MAX_REPR = 1000
#: Arrays with at most this many elements keep their values in the summary string.
SMALL_ARRAY = 8

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class Conversion:
    """One value that changed type or content on its way to plain data.

    ``path`` locates it in the converted data (see the module docstring), ``from_type`` is the
    qualified name of the original type, ``to`` the plain type it became (``str``, ``list``,
    ``dict``, ``int``, ``float``, ...) and ``note`` says what was done in words. Notes never quote
    the value itself, so a report can be shown before redaction without leaking anything.
    """

    path: str
    from_type: str
    to: str
    note: str

    def as_dict(self) -> dict[str, str]:
        """The conversion as plain JSON data, for a section's report."""
        return {"path": self.path, "from_type": self.from_type, "to": self.to, "note": self.note}



def _loaded(module: str, *names: str) -> tuple[Any, ...]:
    """The types ``names`` of ``module`` if it is imported, else none: a value cannot be a
    ``datetime`` or a ``UUID`` unless its module is loaded, and importing ``datetime``,
    ``decimal``, ``fractions`` and ``uuid`` here would cost every training process several
    milliseconds for types its config rarely holds."""
    found = sys.modules.get(module)
    return tuple(getattr(found, name) for name in names) if found is not None else ()

def child_path(parent: str, key: str) -> str:
    """The path of mapping key ``key`` under ``parent``."""
    return key if not parent else f"{parent}.{key}"


def index_path(parent: str, index: int) -> str:
    """The path of list item ``index`` under ``parent``."""
    return f"{parent}[{index}]"


def type_name(obj: Any) -> str:
    """Qualified name of ``obj``'s type (builtins unqualified); never raises."""
    try:
        cls = type(obj)
        module = getattr(cls, "__module__", None)
        name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?")
        if not isinstance(module, str) or module == "builtins":
            return str(name)
        return f"{module}.{name}"
    except Exception:  # pragma: no cover - type() itself cannot fail in practice
        return "?"


def _plain_name(value: Any) -> str:
    """JSON type name of an already converted value."""
    if value is None:
        return "null"
    return type(value).__name__


def _safe_repr(obj: Any) -> str | None:
    """``repr`` (else ``str``) without memory addresses, shortened; None if both raise."""
    for render in (repr, str):
        try:
            text = render(obj)
        except Exception:
            continue
        if not isinstance(text, str):
            continue
        text = _ADDRESS.sub("", text)
        if len(text) > MAX_REPR:
            text = text[: MAX_REPR - 1] + "…"
        return text
    return None


def _qualified_name(fn: Any) -> str:
    """``module.QualName`` of a function, method, class or partial."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({_qualified_name(fn.func)})"
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return type_name(fn)
    if not isinstance(module, str) or module == "builtins":
        self_obj = getattr(fn, "__self__", None)
        # Bound builtin methods ("append" of a list) read better with their owner's type.
        if self_obj is not None and not isinstance(self_obj, types.ModuleType) and "." not in name:
            return f"{type_name(self_obj)}.{name}"
        return name
    return f"{module}.{name}"


def _is_function_like(value: Any) -> bool:
    return isinstance(
        value,
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            types.MethodWrapperType,
            types.WrapperDescriptorType,
            types.MethodDescriptorType,
            types.ClassMethodDescriptorType,
            functools.partial,
            staticmethod,
            classmethod,
        ),
    )


def _module_of(value: Any) -> str:
    module = getattr(type(value), "__module__", "")
    return module if isinstance(module, str) else ""


def _encodable(text: str) -> bool:
    """Whether UTF-8 can encode ``text`` (it holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Converter:
    """One conversion run: the conversions found so far and the containers being visited."""

    __slots__ = ("conversions", "active")

    def __init__(self) -> None:
        self.conversions: list[Conversion] = []
        # id() of every container on the current path -> its path, to cut cycles.
        self.active: dict[int, str] = {}

    def note(self, path: str, value: Any, result: Any, note: str) -> Any:
        """Record that ``value`` became ``result``; returns ``result``."""
        self.conversions.append(Conversion(path, type_name(value), _plain_name(result), note))
        return result

    def _text(self, value: str, path: str) -> str:
        """A str that UTF-8 can encode (lone surrogates are escaped)."""
        if _encodable(value):
            return value
        escaped = value.encode("utf-8", "backslashreplace").decode("utf-8")
        return self.note(path, value, escaped, "unencodable characters (lone surrogates) escaped")

    def _float(self, number: float, path: str, value: Any) -> Any:
        """``number`` (from ``value``), or its text if JSON cannot hold it."""
        if math.isfinite(number):
            return number
        text = "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
        return self.note(path, value, text, "non-finite float as text (not JSON)")

    # -- entry points --------------------------------------------------------------------------

    def value(self, value: Any, path: str, depth: int) -> Any:
        """Convert any value; never raises."""
        tv = type(value)
        if tv is str:
            return self._text(value, path)
        if value is None or tv is int or tv is bool:
            return value
        if tv is float:
            return self._float(value, path, value)
        try:
            return self._slow(value, path, depth)
        except RecursionError:
            return self.note(path, value, "<too deep>", "nesting too deep for this interpreter; cut")
        except Exception as exc:
            error = type(exc).__name__
            marker = f"<unconvertible {type_name(value)}: {error}>"
            return self.note(path, value, marker, f"conversion raised {error}; kept a marker")

    def _nested(
        self, value: Any, path: str, depth: int, walk: Callable[[], Any], note: str | None = None
    ) -> Any:
        """``walk()`` (the converted contents of container ``value``) with ``note`` recorded for
        it, or a marker instead where ``value`` is too deep or already being visited (a cycle)."""
        if depth >= MAX_DEPTH:
            marker = f"<max depth {MAX_DEPTH}>"
            return self.note(path, value, marker, f"nested deeper than {MAX_DEPTH} levels; cut")
        ancestor = self.active.get(id(value))
        if ancestor is not None:
            marker = f"<cycle: {ancestor or '<root>'}>"
            return self.note(path, value, marker, "reference cycle cut; the marker names the ancestor")
        self.active[id(value)] = path
        try:
            result = walk()
        finally:
            del self.active[id(value)]
        if note is not None:
            self.note(path, value, result, note)
        return result

    def _slow(self, value: Any, path: str, depth: int) -> Any:
        module = _module_of(value)

        # OmegaConf first: its containers also look like mappings and sequences, but reading
        # them as such would resolve interpolations one by one (and raise on missing values).
        if module.startswith("omegaconf"):
            return self._omegaconf(value, path, depth)
        if isinstance(value, enum.Enum):
            name = value.name if value.name is not None else str(value.value)
            return self.note(path, value, f"{type(value).__name__}.{name}", "enum member as ClassName.member")
        if isinstance(value, Mapping):
            note = None if type(value) is dict else "mapping type as plain mapping"
            return self._mapping(value, value, path, depth, note)
        if isinstance(value, list):
            return self._sequence(value, path, depth)
        if isinstance(value, tuple):
            fields = getattr(value, "_fields", None)
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
                attrs = dict(zip(fields, value, strict=False))
                return self._mapping(value, attrs, path, depth, "named tuple as mapping")
            note = "torch.Size as list" if module == "torch" else "tuple as list"
            return self._sequence(value, path, depth, note)
        if isinstance(value, (str, int, float)):
            return self._scalar_subclass(value, path)
        if isinstance(value, (set, frozenset, Set)):
            return self._nested(
                value,
                path,
                depth,
                lambda: sorted((self.value(item, f"{path}[*]", depth + 1) for item in value), key=_sort_key),
                "set as sorted list",
            )
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self._bytes(value, path)
        if isinstance(value, os.PathLike):
            result = os.fspath(value)
            if isinstance(result, bytes):
                result = result.decode("utf-8", "backslashreplace")
            return self._text(self.note(path, value, result, "path as text"), path)
        if module == "torch" and type(value).__name__ in _TORCH_BY_STR:
            return self.note(path, value, str(value), f"torch.{type(value).__name__} as text")
        if _is_array_like(value):
            return self._array(value, path, depth)
        if module.startswith("numpy") and hasattr(value, "kind") and hasattr(value, "itemsize"):
            return self.note(path, value, str(value), "numpy dtype as text")
        found = _fields(value)
        if found is not None:
            kind, attrs = found
            return self._mapping(value, attrs, path, depth, f"{kind} as mapping")
        if isinstance(value, type) or _is_function_like(value):
            return self.note(path, value, _qualified_name(value), "callable as its qualified name")
        if inspect.isgenerator(value) or inspect.iscoroutine(value) or inspect.isasyncgen(value):
            name = getattr(value, "__qualname__", None) or type(value).__name__
            result = f"<{type(value).__name__} {name}>"
            self.note(path, value, result, "generator not consumed; its name kept")
            if inspect.iscoroutine(value):
                value.close()  # no "never awaited" warning for a coroutine we only looked at
            return result
        if isinstance(value, (range, slice)):
            return self.note(path, value, repr(value), "range as its repr")
        if isinstance(value, _loaded("datetime", "datetime", "date", "time")):
            return self.note(path, value, value.isoformat(), "date/time as ISO 8601 text")
        if isinstance(value, _loaded("datetime", "timedelta")):
            return self.note(path, value, value.total_seconds(), "timedelta as seconds")
        if isinstance(value, (complex, *_loaded("decimal", "Decimal"), *_loaded("fractions", "Fraction"),
                              *_loaded("uuid", "UUID"))):
            return self.note(path, value, str(value), "exact number or UUID as text")
        if isinstance(value, re.Pattern):
            return self.note(path, value, value.pattern if isinstance(value.pattern, str) else repr(value.pattern), "compiled regex as its pattern")
        if isinstance(value, Iterator):
            return self.note(path, value, f"<iterator {type_name(value)}>", "iterator not consumed")
        if isinstance(value, Sequence):
            return self._sequence(value, path, depth, f"{type_name(value)} as list")
        if callable(value) and hasattr(value, "__qualname__"):
            return self.note(path, value, _qualified_name(value), "callable as its qualified name")
        return self._opaque(value, path)

    # -- kinds ---------------------------------------------------------------------------------

    def _opaque(self, value: Any, path: str) -> str:
        text = _safe_repr(value)
        if text is None:
            return self.note(path, value, f"<unrepresentable {type_name(value)}>", "repr and str both raised; kept the type name")
        return self._text(self.note(path, value, text, "object as its repr (addresses removed)"), path)

    def _scalar_subclass(self, value: Any, path: str) -> Any:
        if isinstance(value, str):
            return self._text(self.note(path, value, str.__str__(value), "str subclass as str"), path)
        if isinstance(value, int):
            return self.note(path, value, int.__index__(value), "int subclass as int")
        number = self.note(path, value, float.__float__(value), "float subclass (e.g. numpy.float64) as float")
        return self._float(number, path, value)

    def _bytes(self, value: Any, path: str) -> str:
        raw = bytes(value)
        try:
            return self.note(path, value, raw.decode("utf-8"), "bytes decoded as UTF-8")
        except UnicodeDecodeError:
            return self.note(path, value, "0x" + raw[:512].hex() + ("…" if len(raw) > 512 else ""), f"{len(raw)} non-UTF-8 bytes as hex")

    def _array(self, value: Any, path: str, depth: int) -> Any:
        shape = tuple(int(n) for n in value.shape)
        if shape == ():
            item = value.item()
            return self.note(path, value, self.value(item, path, depth + 1), "0-d array or scalar as its item")
        dtype = str(value.dtype)
        size = math.prod(shape)
        text = f"{type_name(value)}(shape={list(shape)}, dtype={dtype}"
        if size <= SMALL_ARRAY:
            try:
                items = _safe_repr(value.tolist())
            except Exception:  # tensors on the meta device have no values to show
                items = None
            if items is not None:
                text += f", values={items}"
        return self.note(path, value, text + ")", "array as a shape/dtype summary")

    def _sequence(self, value: Any, path: str, depth: int, note: str | None = None) -> Any:
        return self._nested(
            value,
            path,
            depth,
            lambda: [self.value(item, index_path(path, i), depth + 1) for i, item in enumerate(value)],
            note,
        )

    def _mapping(
        self, value: Any, mapping: Mapping[Any, Any], path: str, depth: int, note: str | None = None
    ) -> Any:
        """Convert ``mapping``, the contents of ``value`` (the object guarded against cycles)."""
        return self._nested(value, path, depth, lambda: self._items(list(mapping.items()), path, depth), note)

    def _items(self, items: list[tuple[Any, Any]], path: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        odd: list[tuple[str, str, Any]] = []
        for key, val in items:
            if type(key) is not str or not (key.isascii() or _encodable(key)):
                odd.append((self._key_text(key, path, depth), type_name(key), val))
                continue
            # Plain JSON values inline: this loop runs once per key of every config.
            tv = type(val)
            if val is None or tv is int or tv is bool or (tv is str and val.isascii()):
                out[key] = val
            elif tv is float and math.isfinite(val):
                out[key] = val
            else:
                out[key] = self.value(val, child_path(path, key), depth + 1)
        # Non-text keys go after the text ones, in a fixed order, so renames are stable.
        odd.sort(key=lambda item: (item[0], item[1]))
        for text, tname, val in odd:
            name = text
            counter = 1
            while name in out:
                name = f"{text} <{tname}>" if counter == 1 else f"{text} <{tname} #{counter}>"
                counter += 1
            note = "collided with another key after conversion; renamed" if name != text else "stored as text"
            out[name] = self.value(val, child_path(path, name), depth + 1)
            self.conversions.append(Conversion(child_path(path, name), tname, "str", f"key of type {tname} {note}"))
        return dict(sorted(out.items()))

    def _key_text(self, key: Any, path: str, depth: int) -> str:
        sink = _Converter()
        sink.active = self.active
        converted = sink.value(key, path, depth + 1)
        if isinstance(converted, str):
            return converted
        return json.dumps(converted, sort_keys=True)

    def _omegaconf(self, value: Any, path: str, depth: int) -> Any:
        omegaconf = sys.modules.get("omegaconf")
        to_container = getattr(getattr(omegaconf, "OmegaConf", None), "to_container", None)
        if to_container is None:
            return self._opaque(value, path)
        try:
            data = to_container(value, resolve=True, throw_on_missing=False)
            note = "OmegaConf container (interpolations resolved)"
        except Exception:
            try:
                data = to_container(value, resolve=False)
                note = "OmegaConf container (interpolations left unresolved: resolving raised)"
            except Exception:
                return self._opaque(value, path)
        result = self.value(data, path, depth)
        if path:
            self.note(path, value, result, note)
        return result


#: torch types whose str() is their natural plain form (torch.float32, cuda:0, torch.strided).
_TORCH_BY_STR = frozenset({"dtype", "device", "layout", "memory_format", "qscheme"})


def _is_array_like(value: Any) -> bool:
    """numpy arrays and scalars, torch tensors, jax arrays...: recognised without importing them."""
    cls = type(value)
    return (
        hasattr(cls, "shape")
        and hasattr(cls, "dtype")
        and callable(getattr(cls, "item", None))
        and not isinstance(value, type)
    )


def _getattrs(obj: Any, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        try:
            out[name] = getattr(obj, name)
        except Exception as exc:
            out[name] = _Unreadable(type(exc).__name__)
    return out


class _Unreadable:
    """Stands for an attribute whose getter raised, so the key is kept with a marker."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"<unreadable attribute: {self.error}>"


def _fields(value: Any) -> tuple[str, dict[str, Any]] | None:
    """What kind of record ``value`` is (a dataclass instance, a namespace, a pydantic v2 or v1
    model) and its field values; None if it is none of them."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "dataclass", _getattrs(value, [f.name for f in dataclasses.fields(value)])
    if isinstance(value, (argparse.Namespace, types.SimpleNamespace)):
        return "namespace", dict(vars(value))
    cls = type(value)
    fields = getattr(cls, "model_fields", None)
    if isinstance(fields, Mapping) and callable(getattr(value, "model_dump", None)):
        out = _getattrs(value, [str(name) for name in fields])
        extra = getattr(value, "__pydantic_extra__", None)
        if isinstance(extra, Mapping):
            for key, val in extra.items():
                out.setdefault(str(key), val)
        return "pydantic model", out
    fields = getattr(cls, "__fields__", None)
    if isinstance(fields, Mapping) and callable(getattr(value, "dict", None)):
        if callable(getattr(value, "json", None)) and hasattr(cls, "__config__"):
            return "pydantic model", _getattrs(value, [str(name) for name in fields])
    return None


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True)


def _root_attrs(obj: Any, conv: _Converter) -> Mapping[Any, Any] | None:
    """The top-level keys of a host object: a mapping itself, a record's fields, or the public
    attributes of an object; None for an OmegaConf container or a value without attributes."""
    if _module_of(obj).startswith("omegaconf"):
        return None
    if isinstance(obj, Mapping):
        return obj
    if isinstance(obj, (argparse.Namespace, types.SimpleNamespace)):
        return dict(vars(obj))  # before _fields: a dataclass namespace keeps every parsed arg
    found = _fields(obj)
    if found is not None:
        return found[1]
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, Mapping) and not isinstance(obj, type) and not callable(obj):
        public: dict[str, Any] = {}
        for key, val in attrs.items():
            if isinstance(key, str) and key.startswith("_"):
                conv.conversions.append(
                    Conversion(key, type_name(val), "omitted", "private attribute left out")
                )
            else:
                public[key] = val
        return public
    return None


def to_plain(obj: Any) -> tuple[dict[str, Any], list[Conversion]]:
    """Convert a host config object to plain, sorted JSON data and list what was lossy.

    ``obj`` may be an argparse Namespace, a dataclass, a mapping, an OmegaConf container, a
    pydantic model or any object with a ``__dict__`` (its public attributes; private ones are
    listed as omitted). A value that is not a mapping at the top is returned as ``{"value": ...}``.
    Never raises; see the module docstring for the guarantees on the result.
    """
    conv = _Converter()
    try:
        attrs = _root_attrs(obj, conv)
        data = conv.value(obj, "", 0) if attrs is None else conv._mapping(obj, attrs, "", 0)
        if not isinstance(data, dict):
            conv.conversions.append(
                Conversion(
                    "value", type_name(obj), _plain_name(data), "not a mapping; kept as 'value'"
                )
            )
            data = {"value": data}
        return data, conv.conversions
    except Exception as exc:  # a last resort: the walk itself guards every value
        marker = f"<unconvertible {type_name(obj)}: {type(exc).__name__}>"
        conv.conversions.append(Conversion("value", type_name(obj), "str", "conversion failed"))
        return {"value": marker}, conv.conversions
