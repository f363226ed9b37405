"""Per-role args from slime's ``--megatron-config-path``: what the actor and the critic really ran with.

slime trains the PPO actor and critic from one launch namespace plus a YAML file of per-role
overrides. A tracker that logs only the launch namespace records the wrong learning rate (and
checkpoint paths, warmup, ...) for at least one of them, so the adapter resolves each role's
effective args the way slime does and logs those.

The file format is slime's::

    megatron:
      - name: default          # a label; slime does not use it
        role: critic           # "actor" or "critic"; at most one entry per role
        overrides:             # argparse attribute names (``args`` is accepted as an alias)
          lr: 1e-5

How the overrides are applied (slime's ``_apply_megatron_role_overrides``, followed here):

* each role starts from a deep copy of the launch namespace, which is never modified;
* ``num_nodes`` and ``num_gpus_per_node`` are skipped: placement always follows the command line;
* a key the namespace lacks is set anyway, with a warning (it is usually a typo);
* a string value for a key whose launch value is an ``int`` or ``float`` is converted to that type,
  because YAML 1.1 reads ``1e-5`` (no dot) as a string; a string that does not convert stays a
  string, with a warning;
* a role with no entry inherits the launch namespace unchanged;
* the critic then gets slime's forced settings, ``CRITIC_FORCED_SETTINGS`` in that order, which no
  file can change, and ``disable_param_buffers_cpu_backup=False`` unless the file sets it.

An entry without ``role:`` is ignored, as slime ignores it (it selects entries by their role), with
one warning naming the entry.

Where this module differs from slime, on purpose: malformed files raise :class:`RoleConfigError`
naming the file, the entry and the fix (slime raises bare assertions or ``AttributeError``), and a
quoted ``"false"`` (or ``"no"``, ``"off"``, ``"0"``) for a ``bool`` key gives ``False`` (slime
calls ``bool("false")``, which is ``True``). When slime itself is importable, :func:`resolve_role_args` validates the file here
and then lets slime's own ``parse_megatron_role_args`` apply it, so both always agree with slime.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracking_core.plugin_api import TrackingError

log = logging.getLogger("tracking_core.slime.role_args")

#: The roles slime resolves from ``--megatron-config-path`` (its function asserts on any other).
SUPPORTED_ROLES: tuple[str, ...] = ("actor", "critic")

#: Override keys slime skips: GPU placement always follows ``--actor-num-*`` / ``--critic-num-*``.
IGNORED_KEYS: frozenset[str] = frozenset({"num_nodes", "num_gpus_per_node"})

#: Settings slime forces on the critic after the overrides, in slime's order. A file cannot change
#: them: they switch off features that only make sense for the policy.
CRITIC_FORCED_SETTINGS: tuple[tuple[str, Any], ...] = (
    ("kl_coef", 0),
    ("use_opd", False),
    ("custom_advantage_function_path", None),
    ("untie_embeddings_and_output_weights", True),
)

#: Forced on the critic only when the file does not set it (slime keeps the critic's parameter
#: buffers backed up on CPU unless told otherwise).
CRITIC_DEFAULT_UNLESS_SET: tuple[tuple[str, Any], ...] = (
    ("disable_param_buffers_cpu_backup", False),
)

_ENTRY_FIELDS = ("name", "role", "overrides", "args")
_EXAMPLE = "megatron: [{name: default, role: critic, overrides: {lr: 1e-5}}]"
_TRUE_STRINGS = frozenset({"true", "yes", "on", "y", "1"})
_FALSE_STRINGS = frozenset({"false", "no", "off", "n", "0"})
#: Role-less entries already warned about: (file, index, entry).
_warned_roleless: set[tuple[str, int, str]] = set()


class RoleConfigError(TrackingError, ValueError):
    """A ``--megatron-config-path`` file slime's format does not allow; the message says the fix."""


def _read_yaml(path: str) -> Any:
    """Read one YAML document with ``safe_load``, as slime does; PyYAML is optional, so import late."""
    try:
        import yaml
    except ImportError as exc:
        raise ImportError(
            f"reading the --megatron-config-path file {path} needs PyYAML, which is not installed: "
            "pip install pyyaml"
        ) from exc
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except OSError as exc:
        raise RoleConfigError(
            f"{path}: cannot read the --megatron-config-path file ({exc.strerror or exc}); "
            "check the path given to --megatron-config-path"
        ) from exc
    except yaml.YAMLError as exc:
        raise RoleConfigError(
            f"{path}: not valid YAML ({exc}); fix the syntax, the expected shape is {_EXAMPLE}"
        ) from exc


def _entry_overrides(path: str, index: int, entry: Mapping[Any, Any]) -> dict[str, Any]:
    """The overrides of one entry, chosen as slime chooses them: ``overrides or args or {}``."""
    for field in ("overrides", "args"):
        value = entry.get(field)
        if value is not None and not isinstance(value, Mapping):
            raise RoleConfigError(
                f"{path}: megatron entry {index} (role {entry.get('role')!r}): {field!r} must be a "
                f"mapping of argparse attribute names to values, got {type(value).__name__}; "
                f"write it as e.g. {field}: {{lr: 1e-5}}"
            )
    overrides = entry.get("overrides")
    alias = entry.get("args")
    if overrides and alias:
        log.warning(
            "%s: megatron entry %d (role %r) has both 'overrides' and 'args'; using 'overrides' "
            "as slime does and ignoring 'args' (%s); merge them into 'overrides'",
            path,
            index,
            entry.get("role"),
            ", ".join(map(str, alias)),
        )
    chosen = overrides or alias or {}
    for key in chosen:
        if not isinstance(key, str):
            raise RoleConfigError(
                f"{path}: megatron entry {index} (role {entry.get('role')!r}): override key "
                f"{key!r} is of type {type(key).__name__}, not a string; keys are argparse attribute names "
                "such as tensor_model_parallel_size (quote it if YAML read it as another type)"
            )
    return dict(chosen)


def _warn_roleless(path: str, index: int, entry: Mapping[Any, Any]) -> None:
    """One warning per role-less entry of a file (the file is read once per role resolved)."""
    overrides = entry.get("overrides") or entry.get("args") or {}
    keys = ", ".join(map(str, overrides)) if isinstance(overrides, Mapping) else repr(overrides)
    key = (path, index, repr(entry))
    if key in _warned_roleless:
        return
    _warned_roleless.add(key)
    log.warning(
        "%s: megatron entry %d (name %r, overrides: %s) has no 'role' (got %r), so slime "
        "applies it to no role and neither does tracking-core; add role: actor or role: critic "
        "to it if it was meant for one",
        path,
        index,
        entry.get("name"),
        keys or "none",
        entry.get("role"),
    )


def load_role_overrides(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read and validate a ``--megatron-config-path`` file: role -> its overrides, in file order.

    Only roles with an entry appear; a role without one inherits the launch args. Entries for roles
    slime does not use are returned too (with a warning), so the caller decides what to do with
    them. An entry without a ``role`` is skipped with a warning naming it, as slime skips it.
    Raises :class:`RoleConfigError` naming the file, the entry index and the fix when the
    file is not slime's format, and ``ImportError`` when PyYAML is missing.
    """
    path_str = os.fspath(path)
    raw = _read_yaml(path_str)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping) or "megatron" not in raw:
        hint = ""
        if isinstance(raw, Mapping) and "critic" in raw:
            hint = (
                " (a top-level 'critic' key is the older format: move it into an entry with "
                "role: critic)"
            )
        got = "an empty file" if raw == {} else f"top-level {type(raw).__name__}"
        if isinstance(raw, Mapping) and raw:
            got = f"top-level keys {', '.join(map(str, raw))}"
        raise RoleConfigError(
            f"{path_str}: a --megatron-config-path file must have a top-level 'megatron' list, "
            f"got {got}{hint}; write it as {_EXAMPLE}"
        )
    entries = raw["megatron"]
    if not isinstance(entries, list):
        raise RoleConfigError(
            f"{path_str}: 'megatron' must be a list of role entries, got "
            f"{type(entries).__name__}; write it as {_EXAMPLE}"
        )

    result: dict[str, dict[str, Any]] = {}
    first_index: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise RoleConfigError(
                f"{path_str}: megatron entry {index} must be a mapping with 'role' and "
                f"'overrides', got {type(entry).__name__} {entry!r}; write it as "
                "{name: default, role: critic, overrides: {lr: 1e-5}}"
            )
        role = entry.get("role")
        if not isinstance(role, str) or not role:
            # slime picks entries by ``entry.get("role") == role``: one without a role is
            # never picked, for any role. Follow it, but say so: it is usually a forgotten line.
            _warn_roleless(path_str, index, entry)
            continue
        unknown_fields = [str(field) for field in entry if field not in _ENTRY_FIELDS]
        if unknown_fields:
            log.warning(
                "%s: megatron entry %d (role %r) has unknown field(s) %s, which slime ignores; "
                "the fields are %s",
                path_str,
                index,
                role,
                ", ".join(unknown_fields),
                ", ".join(_ENTRY_FIELDS),
            )
        if role in first_index:
            raise RoleConfigError(
                f"{path_str}: megatron entries {first_index[role]} and {index} both have "
                f"role {role!r}; slime allows at most one entry per role, merge their overrides"
            )
        first_index[role] = index
        if role not in SUPPORTED_ROLES:
            log.warning(
                "%s: megatron entry %d has role %r, which slime does not resolve (roles: %s); "
                "it is ignored",
                path_str,
                index,
                role,
                ", ".join(SUPPORTED_ROLES),
            )
        result[role] = _entry_overrides(path_str, index, entry)
    return result


def _coerce(role: str, key: str, value: Any, original: Any) -> Any:
    """Give a string override the type of the launch value, as slime does for numbers.

    YAML 1.1 reads ``1e-5`` as a string, so without this the critic's ``lr`` would be ``"1e-5"``.
    Only strings are converted and only when the launch value is an ``int``/``float`` (a YAML int
    on a float key stays an int, as in slime). ``bool`` is an ``int`` too and slime turns any
    non-empty string into ``True``; here the spellings of false (``"false"``, ``"no"``, ``"off"``,
    ``"n"``, ``"0"``) give ``False``, and only other strings follow slime, with a warning.
    """
    if original is None or not isinstance(value, str) or not isinstance(original, (int, float)):
        return value
    if type(original) is bool:
        lowered = value.strip().lower()
        if lowered in _TRUE_STRINGS or lowered in _FALSE_STRINGS:
            return lowered in _TRUE_STRINGS
        log.warning(
            "%s override %r=%r is not a boolean for a bool argument; read as %s like slime "
            "does (write true or false without quotes)",
            role,
            key,
            value,
            bool(value),
        )
        return bool(value)
    try:
        return type(original)(value)
    except (TypeError, ValueError):
        log.warning(
            "%s override %r=%r does not convert to %s like the launch value %r; kept as a string",
            role,
            key,
            value,
            type(original).__name__,
            original,
        )
        return value


def apply_role_overrides(
    base: argparse.Namespace, overrides: Mapping[str, Any], role: str
) -> argparse.Namespace:
    """A new namespace: ``base`` plus one role's overrides plus slime's forced critic settings.

    ``base`` is deep-copied first and never modified, so the launch args and each role's args can
    be logged side by side. ``overrides`` is what :func:`load_role_overrides` returned for the
    role (empty for a role without an entry).
    """
    role_args = copy.deepcopy(base)
    for key, value in overrides.items():
        if key in IGNORED_KEYS:
            log.info(
                "ignoring %s override %r: GPU placement always follows the command line", role, key
            )
            continue
        if hasattr(role_args, key):
            value = _coerce(role, key, value, getattr(role_args, key))
        else:
            hint = ""
            if "-" in key and hasattr(role_args, key.replace("-", "_")):
                hint = f" (did you mean {key.replace('-', '_')!r}? keys are attribute names)"
            log.warning(
                "%s override %r is not a known argument; setting it anyway%s", role, key, hint
            )
        setattr(role_args, key, value)
    if role == "critic":
        for key, forced in CRITIC_FORCED_SETTINGS:
            setattr(role_args, key, forced)
        for key, forced in CRITIC_DEFAULT_UNLESS_SET:
            if key not in overrides:
                setattr(role_args, key, forced)
    return role_args


def _slime_parser() -> Callable[..., Any] | None:
    """slime's own ``parse_megatron_role_args`` when slime is importable, else ``None``."""
    try:
        if importlib.util.find_spec("slime") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        module = importlib.import_module("slime.utils.arguments")
    except Exception as exc:  # slime imports sglang, megatron, ...; any of them may be broken
        log.info(
            "slime is installed but slime.utils.arguments does not import (%s); resolving role "
            "args with tracking-core's own copy of its rules",
            exc,
        )
        return None
    parser = getattr(module, "parse_megatron_role_args", None)
    if not callable(parser):
        log.info(
            "this slime has no parse_megatron_role_args; resolving role args with "
            "tracking-core's own copy of its rules"
        )
        return None
    return parser


def _check_roles(roles: Sequence[str]) -> list[str]:
    if isinstance(roles, str):
        roles = (roles,)
    unsupported = [role for role in roles if role not in SUPPORTED_ROLES]
    if unsupported:
        raise ValueError(
            f"cannot resolve role args for {', '.join(map(repr, unsupported))}: slime's "
            f"--megatron-config-path knows the roles {', '.join(SUPPORTED_ROLES)}"
        )
    return list(dict.fromkeys(roles))


def resolve_role_args(
    base: argparse.Namespace,
    config_path: str | os.PathLike[str] | None,
    roles: Sequence[str] = ("actor", "critic"),
    *,
    prefer_slime: bool = True,
) -> dict[str, argparse.Namespace]:
    """Each role's effective args, exactly as slime's runtime builds them: role -> new namespace.

    With ``config_path`` (``args.megatron_config_path``) the file is validated here (clear errors
    for a malformed file), then applied by slime's own ``parse_megatron_role_args`` when slime is
    importable and ``prefer_slime`` is true, else by :func:`apply_role_overrides`. Without a file,
    the roles are what slime's ``create_training_models`` hands them: a copy of ``base`` for the
    actor, and for the critic a copy with only ``disable_param_buffers_cpu_backup=False`` (slime
    forces the other critic settings only when a file is given).

    Every namespace returned is new; ``base`` is never modified.
    """
    wanted = _check_roles(roles)
    if config_path is None:
        resolved: dict[str, argparse.Namespace] = {}
        for role in wanted:
            role_args = copy.deepcopy(base)
            if role == "critic":
                for key, forced in CRITIC_DEFAULT_UNLESS_SET:
                    setattr(role_args, key, forced)
            resolved[role] = role_args
        return resolved

    path = os.fspath(config_path)
    overrides = load_role_overrides(path)
    slime_parse = _slime_parser() if prefer_slime else None
    resolved = {}
    for role in wanted:
        if slime_parse is not None:
            role_args = slime_parse(base, path, role=role)
            if not isinstance(role_args, argparse.Namespace):
                raise TypeError(
                    f"slime's parse_megatron_role_args returned {type(role_args).__name__} for "
                    f"role {role!r}, not an argparse.Namespace; this slime version is not supported"
                )
            if role_args is base:
                role_args = copy.deepcopy(base)
        else:
            if role not in overrides:
                log.info(
                    "%s: no megatron entry with role=%s; it inherits the launch args", path, role
                )
            role_args = apply_role_overrides(base, overrides.get(role, {}), role)
        resolved[role] = role_args
    return resolved
