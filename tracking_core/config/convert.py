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
from collections.abc import Iterator, Mapping, Sequence, Set
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


def _float(value: float, path: str, conversions: list[Conversion], from_type: str) -> Any:
    if math.isfinite(value):
        return value
    text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    conversions.append(Conversion(path, from_type, "str", "non-finite float as text (not JSON)"))
    return text


def _text(value: str, path: str, conversions: list[Conversion]) -> str:
    """A str that UTF-8 can encode (lone surrogates are escaped)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        conversions.append(
            Conversion(path, "str", "str", "unencodable characters (lone surrogates) escaped")
        )
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _encodable(text: str) -> bool:
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

    # -- entry points --------------------------------------------------------------------------

    def value(self, value: Any, path: str, depth: int) -> Any:
        """Convert any value; never raises."""
        tv = type(value)
        if tv is str:
            return _text(value, path, self.conversions)
        if value is None or tv is int or tv is bool:
            return value
        if tv is float:
            return _float(value, path, self.conversions, "float")
        try:
            return self._slow(value, path, depth)
        except RecursionError:
            marker = "<too deep>"
            self.note(path, value, marker, "nesting too deep for this interpreter; cut")
            return marker
        except Exception as exc:
            marker = f"<unconvertible {type_name(value)}: {type(exc).__name__}>"
            self.note(path, value, marker, f"conversion raised {type(exc).__name__}; kept a marker")
            return marker

    def _enter(self, value: Any, path: str, depth: int) -> str | None:
        """Cycle and depth guard for containers: a marker to return instead, or None."""
        if depth >= MAX_DEPTH:
            marker = f"<max depth {MAX_DEPTH}>"
            self.note(path, value, marker, f"nested deeper than {MAX_DEPTH} levels; cut")
            return marker
        ancestor = self.active.get(id(value))
        if ancestor is not None:
            marker = f"<cycle: {ancestor or '<root>'}>"
            self.note(path, value, marker, "reference cycle cut; the marker names the ancestor")
            return marker
        return None

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
            result = self._mapping(value, path, depth, None)
            if type(value) is not dict and isinstance(result, dict):
                self.note(path, value, result, "mapping type as plain mapping")
            return result
        if isinstance(value, list):
            return self._sequence(value, path, depth, None)
        if isinstance(value, tuple):
            fields = getattr(value, "_fields", None)
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
                return self._attrs(
                    value, dict(zip(fields, value, strict=False)), path, depth, "named tuple"
                )
            note = "torch.Size as list" if module == "torch" else "tuple as list"
            return self._sequence(value, path, depth, note)
        if isinstance(value, (str, int, float)):
            return self._scalar_subclass(value, path)
        if isinstance(value, (set, frozenset, Set)):
            return self._set(value, path, depth)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return self._bytes(value, path)
        if isinstance(value, os.PathLike):
            result = os.fspath(value)
            if isinstance(result, bytes):
                result = result.decode("utf-8", "backslashreplace")
            self.note(path, value, result, "path as text")
            return _text(result, path, self.conversions)
        if module == "torch" and type(value).__name__ in _TORCH_BY_STR:
            return self.note(path, value, str(value), f"torch.{type(value).__name__} as text")
        if _is_array_like(value):
            return self._array(value, path, depth)
        if module.startswith("numpy") and hasattr(value, "kind") and hasattr(value, "itemsize"):
            return self.note(path, value, str(value), "numpy dtype as text")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = [f.name for f in dataclasses.fields(value)]
            return self._attrs(value, _getattrs(value, names), path, depth, "dataclass")
        if isinstance(value, (argparse.Namespace, types.SimpleNamespace)):
            return self._attrs(value, dict(vars(value)), path, depth, "namespace")
        fields = _pydantic_fields(value)
        if fields is not None:
            return self._attrs(value, fields, path, depth, "pydantic model")
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
            seconds = value.total_seconds()
            self.note(path, value, seconds, "timedelta as seconds")
            return seconds
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
        self.note(path, value, text, "object as its repr (addresses removed)")
        return _text(text, path, self.conversions)

    def _scalar_subclass(self, value: Any, path: str) -> Any:
        if isinstance(value, str):
            result: Any = str.__str__(value)
            self.note(path, value, result, "str subclass as str")
            return _text(result, path, self.conversions)
        if isinstance(value, int):
            return self.note(path, value, int.__index__(value), "int subclass as int")
        result = float.__float__(value)
        self.note(path, value, result, "float subclass (e.g. numpy.float64) as float")
        return _float(result, path, self.conversions, type_name(value))

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

    def _set(self, value: Any, path: str, depth: int) -> Any:
        marker = self._enter(value, path, depth)
        if marker is not None:
            return marker
        self.active[id(value)] = path
        try:
            items = [self.value(item, f"{path}[*]", depth + 1) for item in value]
        finally:
            del self.active[id(value)]
        items.sort(key=_sort_key)
        self.note(path, value, items, "set as sorted list")
        return items

    def _sequence(self, value: Any, path: str, depth: int, note: str | None) -> Any:
        marker = self._enter(value, path, depth)
        if marker is not None:
            return marker
        self.active[id(value)] = path
        try:
            result = [
                self.value(item, index_path(path, i), depth + 1) for i, item in enumerate(value)
            ]
        finally:
            del self.active[id(value)]
        if note is not None:
            self.note(path, value, result, note)
        return result

    def _attrs(self, value: Any, attrs: dict[str, Any], path: str, depth: int, kind: str) -> Any:
        result = self._mapping(attrs, path, depth, value)
        if isinstance(result, dict):
            self.note(path, value, result, f"{kind} as mapping")
        return result

    def _mapping(self, value: Any, path: str, depth: int, owner: Any) -> Any:
        """Convert a mapping; ``owner`` is the object whose id guards against cycles."""
        guard = value if owner is None else owner
        marker = self._enter(guard, path, depth)
        if marker is not None:
            return marker
        self.active[id(guard)] = path
        try:
            return self._items(list(value.items()), path, depth)
        finally:
            del self.active[id(guard)]

    def _items(self, items: list[tuple[Any, Any]], path: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        odd: list[tuple[str, str, Any, Any]] = []
        for key, val in items:
            if type(key) is not str or not (key.isascii() or _encodable(key)):
                odd.append((self._key_text(key, path, depth), type_name(key), key, val))
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
        for text, tname, _key, val in odd:
            name = text
            note = f"key of type {tname} stored as text"
            if name in out:
                name = f"{text} <{tname}>"
                counter = 2
                while name in out:
                    name = f"{text} <{tname} #{counter}>"
                    counter += 1
                note = f"key of type {tname} collided with another key after conversion; renamed"
            converted = self.value(val, child_path(path, name), depth + 1)
            out[name] = converted
            self.conversions.append(Conversion(child_path(path, name), tname, "str", note))
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


def _pydantic_fields(value: Any) -> dict[str, Any] | None:
    """Field values of a pydantic v2 (or v1) model, or None if ``value`` is not one."""
    cls = type(value)
    fields = getattr(cls, "model_fields", None)
    if isinstance(fields, Mapping) and callable(getattr(value, "model_dump", None)):
        out = _getattrs(value, [str(name) for name in fields])
        extra = getattr(value, "__pydantic_extra__", None)
        if isinstance(extra, Mapping):
            for key, val in extra.items():
                out.setdefault(str(key), val)
        return out
    fields = getattr(cls, "__fields__", None)
    if isinstance(fields, Mapping) and callable(getattr(value, "dict", None)):
        if callable(getattr(value, "json", None)) and hasattr(cls, "__config__"):
            return _getattrs(value, [str(name) for name in fields])
    return None


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True)


def _root_attrs(obj: Any, conv: _Converter) -> dict[str, Any] | None:
    """The top-level attributes of a host object that is not a mapping."""
    if isinstance(obj, (argparse.Namespace, types.SimpleNamespace)):
        return dict(vars(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _getattrs(obj, [f.name for f in dataclasses.fields(obj)])
    fields = _pydantic_fields(obj)
    if fields is not None:
        return fields
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
        if _module_of(obj).startswith("omegaconf"):
            data = conv.value(obj, "", 0)
        elif isinstance(obj, Mapping):
            data = conv._mapping(obj, "", 0, None)
        else:
            attrs = _root_attrs(obj, conv)
            if attrs is None:
                data = conv.value(obj, "", 0)
            else:
                data = conv._mapping(attrs, "", 0, obj)
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
