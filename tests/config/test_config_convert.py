"""to_plain: any host object to sorted JSON data, never raising, every lossy step listed."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import decimal
import enum
import functools
import itertools
import json
import math
import os
import pathlib
import signal
import sys
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracking_core.config import Conversion, to_plain
from tracking_core.config.convert import MAX_DEPTH


def plain(value: Any) -> Any:
    """The plain form of one value."""
    data, _ = to_plain({"v": value})
    return data["v"]


def conversions_at(value: Any) -> list[Conversion]:
    return to_plain({"v": value})[1]


def assert_plain(data: Any) -> None:
    """Only JSON types, str keys, sorted at every level, finite floats, UTF-8 encodable."""
    if isinstance(data, dict):
        assert all(type(k) is str for k in data)
        assert list(data) == sorted(data)
        for v in data.values():
            assert_plain(v)
    elif isinstance(data, list):
        for v in data:
            assert_plain(v)
    else:
        assert data is None or type(data) in (str, int, float, bool), type(data)
        if type(data) is float:
            assert math.isfinite(data)
    text = json.dumps(data, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class Perm(enum.Flag):
    R = 1
    W = 2


class _Dtype:
    def __str__(self) -> str:
        return "torch.bfloat16"


_Dtype.__name__ = _Dtype.__qualname__ = "dtype"
_Dtype.__module__ = "torch"


class _Device:
    def __str__(self) -> str:
        return "cuda:0"


_Device.__name__ = _Device.__qualname__ = "device"
_Device.__module__ = "torch"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class BadBoth:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __str__(self) -> str:
        raise RuntimeError("no str")


class Plain:
    def __init__(self) -> None:
        self.x = 1


def top_level_function() -> None:
    """A function to name."""


@dataclasses.dataclass
class Inner:
    size: int = 3
    kind: Color = Color.RED


@dataclasses.dataclass
class Outer:
    name: str = "o"
    inner: Inner = dataclasses.field(default_factory=Inner)
    tags: tuple = ("a", "b")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Color.RED, "Color.RED"),
        (Level.HIGH, "Level.HIGH"),
        (signal.Signals.SIGTERM, "Signals.SIGTERM"),
        (pathlib.PurePosixPath("/a/b"), "/a/b"),
        (_Dtype(), "torch.bfloat16"),
        (_Device(), "cuda:0"),
        ({3, 1, 2}, [1, 2, 3]),
        (frozenset({"b", "a"}), ["a", "b"]),
        ((1, (2, 3)), [1, [2, 3]]),
        (b"abc", "abc"),
        (b"\xff\x00", "0xff00"),
        (bytearray(b"xy"), "xy"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (decimal.Decimal("1.10"), "1.10"),
        (complex(1, 2), "(1+2j)"),
        (datetime.date(2026, 1, 2), "2026-01-02"),
        (datetime.timedelta(seconds=90), 90.0),
        (range(3), "range(0, 3)"),
        (top_level_function, f"{__name__}.top_level_function"),
        (Plain, f"{__name__}.Plain"),
        (len, "len"),
        (
            functools.partial(top_level_function),
            f"functools.partial({__name__}.top_level_function)",
        ),
        (collections.OrderedDict(b=1, a=2), {"a": 2, "b": 1}),
        (types.MappingProxyType({"k": 1}), {"k": 1}),
        (argparse.Namespace(b=1, a=Color.RED), {"a": "Color.RED", "b": 1}),
        (types.SimpleNamespace(z=1), {"z": 1}),
        (collections.deque([1, 2]), [1, 2]),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ],
)
def test_values_become_plain(value: Any, expected: Any) -> None:
    result = plain(value)
    assert result == expected
    assert type(result) is type(expected)
    assert_plain(result)


def test_flag_enum_and_str_subclass() -> None:
    assert plain(Perm.R | Perm.W) in ("Perm.R|W", "Perm.W|R", "Perm.3")

    class Name(str):
        pass

    assert type(plain(Name("x"))) is str


def test_every_lossy_conversion_is_recorded() -> None:
    conversions = conversions_at(Color.RED)
    assert conversions == [
        Conversion("v", f"{__name__}.Color", "str", "enum member as ClassName.member")
    ]
    assert [c.to for c in conversions_at((1, 2))] == ["list"]
    assert [c.path for c in conversions_at({"a": [1, {2}]})] == ["v.a[1]"]
    # Plain JSON values are not conversions.
    assert conversions_at({"a": [1, "x", None, True, 1.5]}) == []


def test_dataclasses_nested() -> None:
    data, conversions = to_plain(Outer())
    assert data == {"inner": {"kind": "Color.RED", "size": 3}, "name": "o", "tags": ["a", "b"]}
    paths = {c.path for c in conversions}
    assert {"inner", "inner.kind", "tags"} <= paths


def test_lambda_method_and_builtin_method() -> None:
    assert plain(lambda: 0).endswith("<lambda>")
    assert plain(Plain().__init__) == f"{__name__}.Plain.__init__"
    assert plain([].append) == "list.append"


def test_generators_are_not_consumed() -> None:
    consumed = []

    def gen():
        while True:
            consumed.append(1)
            yield 1

    g = gen()
    assert plain(g).startswith("<generator ")
    assert consumed == []
    assert plain(itertools.count()) == "<iterator itertools.count>"
    assert plain(map(str, [1])) == "<iterator map>"
    assert plain(iter([1, 2])) == "<iterator list_iterator>"


def test_cycles_are_cut_with_a_marker() -> None:
    a: dict[str, Any] = {"x": 1}
    a["self"] = a
    b: list[Any] = [1]
    b.append(b)
    a["list"] = b
    data, conversions = to_plain(a)
    assert data["self"] == "<cycle: <root>>"
    assert data["list"] == [1, "<cycle: list>"]
    assert {c.path for c in conversions} == {"self", "list[1]"}
    ns = argparse.Namespace(x=1)
    ns.me = ns
    assert to_plain(ns)[0]["me"] == "<cycle: <root>>"


def test_shared_references_are_not_cycles() -> None:
    shared = {"k": 1}
    data, conversions = to_plain({"a": shared, "b": shared})
    assert data == {"a": {"k": 1}, "b": {"k": 1}}
    assert conversions == []


def test_deep_nesting_is_cut() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(5000):
        child: list[Any] = []
        node.append(child)
        node = child
    data, conversions = to_plain({"d": deep})
    assert f"<max depth {MAX_DEPTH}>" in json.dumps(data)
    assert len(conversions) == 1


def test_unrepresentable_objects() -> None:
    assert plain(BadRepr()) == f"<unrepresentable {__name__}.BadRepr>" or plain(
        BadRepr()
    ).startswith("<")
    assert plain(BadBoth()) == f"<unrepresentable {__name__}.BadBoth>"
    text = plain(Plain())
    assert text.startswith(f"<{__name__}.Plain object") and "0x" not in text


def test_getattr_that_raises_keeps_the_key() -> None:
    @dataclasses.dataclass
    class Weird:
        ok: int = 1
        bad: int = 2

        def __getattribute__(self, name: str) -> Any:
            if name == "bad":
                raise RuntimeError("boom")
            return object.__getattribute__(self, name)

    data, _ = to_plain(Weird())
    assert data["ok"] == 1
    assert data["bad"] == "<unreadable attribute: RuntimeError>"


def test_mapping_whose_items_raise() -> None:
    class Broken(collections.abc.Mapping):
        def __getitem__(self, key: Any) -> Any:
            raise KeyError(key)

        def __iter__(self):
            raise RuntimeError("no iteration")

        def __len__(self) -> int:
            return 1

    data, conversions = to_plain({"m": Broken()})
    assert data["m"].startswith("<unconvertible ")
    assert conversions[0].path == "m"
    root, _ = to_plain(Broken())
    assert list(root) == ["value"]


def test_non_string_keys_never_collide() -> None:
    data, conversions = to_plain(
        {1: "int", "1": "str", 1.5: "f", None: "n", Color.RED: "e", (1, 2): "t"}
    )
    assert data["1"] == "str"
    assert data["1 <int>"] == "int"
    assert data["1.5"] == "f" and data["null"] == "n" and data["Color.RED"] == "e"
    assert data["[1, 2]"] == "t"
    assert len(data) == 6
    renamed = [c for c in conversions if "key" in c.note]
    assert len(renamed) == 5


def test_sorted_keys_and_deterministic() -> None:
    value = {"b": {"z": 1, "a": 2}, "a": [{"y": 1, "x": 2}], 3: 1}
    first = to_plain(value)
    assert first == to_plain(value)
    assert_plain(first[0])
    assert list(first[0]) == ["3", "a", "b"]


def test_root_kinds() -> None:
    assert to_plain(argparse.Namespace(a=1)) == ({"a": 1}, [])
    assert to_plain({"a": 1}) == ({"a": 1}, [])
    data, conversions = to_plain(Outer())
    assert "name" in data

    class Custom:
        def __init__(self) -> None:
            self.lr = 0.1
            self._cache = object()

    data, conversions = to_plain(Custom())
    assert data == {"lr": 0.1}
    assert [(c.path, c.to) for c in conversions] == [("_cache", "omitted")]
    data, conversions = to_plain(5)
    assert data == {"value": 5}
    assert conversions[0].path == "value"


def test_pydantic_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")
        lr: float = 1e-5
        path: pathlib.Path = pathlib.Path("/x")
        color: Color = Color.RED

    data, conversions = to_plain(Model(extra_field=2))
    assert data == {"color": "Color.RED", "extra_field": 2, "lr": 1e-5, "path": "/x"}
    nested = plain(Model())
    assert nested["color"] == "Color.RED"
    assert any(c.note == "pydantic model as mapping" for c in conversions_at(Model()))


def test_omegaconf_real() -> None:
    omegaconf = pytest.importorskip("omegaconf")
    cfg = omegaconf.OmegaConf.create(
        {"a": 1, "b": "${a}", "m": "???", "nested": {"c": [1, 2]}, "bad": "${nope}"}
    )
    data, _ = to_plain(cfg)
    assert data["a"] == 1
    assert data["nested"] == {"c": [1, 2]}
    assert data["m"] == "???"
    # An unresolvable interpolation: the container is kept unresolved instead of failing.
    assert data["b"] in (1, "${a}")
    good = omegaconf.OmegaConf.create({"a": 1, "b": "${a}"})
    assert to_plain({"cfg": good})[0]["cfg"] == {"a": 1, "b": 1}


def test_omegaconf_duck_typed_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("omegaconf")

    class DictConfig(dict):
        pass

    DictConfig.__module__ = "omegaconf.dictconfig"

    class OmegaConf:
        @staticmethod
        def to_container(cfg: Any, resolve: bool = True, **_: Any) -> dict[str, Any]:
            return {"resolved": resolve, **cfg}

    fake.OmegaConf = OmegaConf  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "omegaconf", fake)
    data, _ = to_plain(DictConfig(x=Color.RED))
    assert data == {"resolved": True, "x": "Color.RED"}


def test_numpy_values() -> None:
    np = pytest.importorskip("numpy")
    assert plain(np.float32(0.5)) == 0.5
    assert type(plain(np.int64(3))) is int
    assert plain(np.bool_(True)) is True
    assert plain(np.array(2.5)) == 2.5
    assert plain(np.zeros((3, 4), dtype=np.float32)) == "numpy.ndarray(shape=[3, 4], dtype=float32)"
    assert plain(np.arange(3)) == "numpy.ndarray(shape=[3], dtype=int64, values=[0, 1, 2])"
    assert plain(np.dtype("float16")) == "float16"


def test_torch_values() -> None:
    torch = pytest.importorskip("torch")
    assert plain(torch.bfloat16) == "torch.bfloat16"
    assert plain(torch.device("cpu")) == "cpu"
    assert plain(torch.tensor(1.5)) == 1.5
    assert plain(torch.zeros(2, 2)) == (
        "torch.Tensor(shape=[2, 2], dtype=torch.float32, values=[[0.0, 0.0], [0.0, 0.0]])"
    )
    assert plain(torch.zeros(100)) == "torch.Tensor(shape=[100], dtype=torch.float32)"
    assert plain(torch.Size([2, 3])) == [2, 3]
    meta = torch.empty(3, device="meta")
    assert plain(meta).startswith("torch.Tensor(shape=[3]")


def test_fixture_realistic_objects(slime_args: dict[str, Any], tagged: dict[str, Any]) -> None:
    data, conversions = to_plain(slime_args["actor"])
    tagged = tagged["actor"]
    assert len(data) == len(tagged) == 1391
    assert data["attention_backend"] == "AttnBackend.flash"
    assert data["exit_signal"] == "Signals.SIGTERM"
    assert data["params_dtype"] == "torch.bfloat16"
    assert data["eval_datasets"][0]["name"] == "aime24"
    assert data["kl_coef"] == 0.0 and type(data["kl_coef"]) is float
    # Every tagged value (and nothing else) was converted.
    tagged_keys = {k for k, v in tagged.items() if "__type__" in json.dumps(v)}
    assert {c.path.split(".")[0].split("[")[0] for c in conversions} == tagged_keys
    assert_plain(data)


# -- properties ------------------------------------------------------------------------------


class Evil:
    """An object that fails at everything it can."""

    def __repr__(self) -> str:
        raise ValueError("repr")

    def __str__(self) -> str:
        raise ValueError("str")

    def __eq__(self, other: object) -> bool:
        raise ValueError("eq")

    def __hash__(self) -> int:
        return 1

    def __getattr__(self, name: str) -> Any:
        raise ValueError(name)

    def __len__(self) -> int:
        raise ValueError("len")


def _infinite():
    while True:
        yield 1


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8),
    st.binary(max_size=8),
    # Factories, not instances: hypothesis prints strategies, and some of these cannot be printed.
    st.sampled_from(
        [
            lambda: Color.RED,
            lambda: Level.HIGH,
            lambda: Perm.R | Perm.W,
            lambda: signal.Signals.SIGINT,
            _Dtype,
            _Device,
            BadRepr,
            BadBoth,
            Evil,
            Plain,
            lambda: top_level_function,
            lambda: len,
            lambda: Plain,
            lambda: print,
            lambda: pathlib.Path("rel/p"),
            lambda: decimal.Decimal("NaN"),
            lambda: complex(0, 1),
            lambda: range(2),
            lambda: datetime.datetime(2026, 1, 1, 12, 0),
            lambda: functools.partial(max, 1),
            object,
        ]
    ).map(lambda factory: factory()),
    st.builds(lambda: _infinite()),
    st.builds(lambda: itertools.count()),
)
hashable = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.floats(allow_nan=False),
    st.sampled_from([Color.RED, Level.HIGH, (1, 2), frozenset({1})]),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(hashable, children, max_size=4),
        st.sets(hashable, max_size=4),
        st.frozensets(hashable, max_size=3),
        st.dictionaries(st.text(max_size=4), children, max_size=3).map(
            lambda d: argparse.Namespace(**{f"k{i}": v for i, v in enumerate(d.values())})
        ),
        children.map(lambda v: Outer(name="x", inner=Inner(size=1), tags=(v,))),
        st.dictionaries(st.text(max_size=4), children, max_size=3).map(types.MappingProxyType),
    )


structures = st.recursive(leaves, _containers, max_leaves=25)


def _with_cycle(value: Any) -> Any:
    box: dict[Any, Any] = {"value": value}
    box["again"] = box
    if isinstance(value, list):
        value.append(box)
    return box


def check_no_key_lost(inp: Any, out: Any, path: str, paths: set[str]) -> None:
    """Each dict key of the input is in the output, or a conversion names it."""
    if type(inp) is dict:
        if not isinstance(out, dict):
            assert path in paths
            return
        assert len(out) == len(inp), (inp, out)
        for key, value in inp.items():
            child = f"{path}.{key}" if path else key
            if type(key) is str:
                clean = (
                    key.encode("utf-8", "backslashreplace").decode() if not key.isascii() else key
                )
                assert clean in out
                check_no_key_lost(
                    value,
                    out[clean],
                    child if clean == key else f"{path}.{clean}" if path else clean,
                    paths,
                )
            else:
                assert any(p.startswith(f"{path}." if path else "") for p in paths)
    elif type(inp) is list:
        if not isinstance(out, list):
            assert path in paths
            return
        assert len(out) == len(inp)
        for i, (a, b) in enumerate(zip(inp, out, strict=True)):
            check_no_key_lost(a, b, f"{path}[{i}]", paths)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structures, st.booleans())
def test_property_never_raises_and_is_plain(value: Any, cyclic: bool) -> None:
    root = _with_cycle(value) if cyclic else {"root": value}
    data, conversions = to_plain(root)
    assert_plain(data)
    for conversion in conversions:
        json.dumps(conversion.as_dict())
    paths = {c.path for c in conversions}
    check_no_key_lost(root, data, "", paths)
    # Deterministic: the same input gives the same output.
    if not cyclic:
        assert json.dumps(to_plain(root)[0]) == json.dumps(data)


@settings(max_examples=100, deadline=None)
@given(structures)
def test_property_any_root(value: Any) -> None:
    data, _ = to_plain(value)
    assert isinstance(data, dict)
    assert_plain(data)


def test_conversion_notes_never_quote_values() -> None:
    secret = "hf_" + "a" * 34

    class Holder:
        def __repr__(self) -> str:
            return secret

    _, conversions = to_plain({"x": Holder(), "y": (secret,), "z": {secret}})
    for conversion in conversions:
        assert secret not in json.dumps(conversion.as_dict())


def test_paths_environment_and_fspath() -> None:
    class P(os.PathLike):
        def __fspath__(self) -> str:
            return "/tmp/x"

    assert plain(P()) == "/tmp/x"
