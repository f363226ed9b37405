"""The plugin manager: entry-point discovery, each plugin under its own guard.

Built-in and third-party plugins load the same way, from the ``tracking_core`` entry-point group.
A plugin that fails to import, or implements a hook the contract does not know, is recorded with
its error and left out; it never takes the other plugins or the CLI down.
``TRACKING_CORE_DISABLE_PLUGINS=a,b`` blocks plugins by entry-point name before they are imported;
``TRACKING_CORE_TRACE_PLUGINS=1`` traces every hook call to the ``tracking_core.trace`` logger.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs, settings
from .commands import Command, CommandRegistrar
from .errors import BackendUnavailable, PluginLoadError, UnknownBackend
from .registry import BackendRegistrar, BackendSpec, check_selectable
from .views import Views

if TYPE_CHECKING:
    from .host_parser import HostParser

log = logging.getLogger("tracking_core.plugins")

DISABLE_ENV = settings.DISABLE_PLUGINS
TRACE_ENV = settings.TRACE_PLUGINS

_BACKEND_HOOKS = {"register_backends", "open_run", "attach_run", "log_config", "log_metrics", "close_run"}


@dataclass
class PluginInfo:
    """What ``tracking-core plugins`` shows about one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    hooks: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    error: str | None = None
    disabled: bool = False
    #: Backend name -> the import names it ``requires`` that are not installed, and what to do.
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def kinds(self) -> list[str]:
        kinds = []
        if self.backends or _BACKEND_HOOKS & set(self.hooks):
            kinds.append("backend")
        if "collect_config" in self.hooks:
            kinds.append("collector")
        if "register_commands" in self.hooks:
            kinds.append("command")
        if not kinds and ("add_options" in self.hooks or "host_backends" in self.hooks):
            kinds.append("options")
        return kinds

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": ",".join(self.kinds) or None, **asdict(self)}


def disabled_names() -> set[str]:
    return settings.names(DISABLE_ENV)


def _unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """Hook implementations of ``plugin`` that the contract does not define."""
    return [
        caller.name
        for caller in pm.get_hookcallers(plugin) or ()
        if caller.spec is None
    ]


class PluginManager:
    """tracking-core's pluggy manager plus the records of what loaded and what did not."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        self._backends: dict[str, BackendSpec] | None = None
        self._options_warned: set[str] = set()  # plugins whose add_options raised, said once
        if settings.get(TRACE_ENV):
            trace_log = logging.getLogger("tracking_core.trace")
            self.pm.trace.root.setwriter(lambda msg: trace_log.info(msg.rstrip()))
            self.pm.enable_tracing()

    # -- loading -------------------------------------------------------------------------------
    def load_entry_points(self, group: str = hookspecs.PROJECT) -> None:
        from .entry_points import entry_points  # importlib.metadata's answer, without its cost

        blocked = disabled_names()
        seen: set[str] = set()
        for ep in entry_points(group):
            if ep.name in seen:  # the same distribution found twice on sys.path
                continue
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            info = PluginInfo(
                name=ep.name,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
                module=ep.value,
            )
            self.plugins[ep.name] = info
            if ep.name in blocked:
                info.disabled = True
                log.debug("plugin %r disabled by %s", ep.name, DISABLE_ENV)
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's
                info.error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "plugin %r (distribution %s) failed to import and is left out: %s",
                    ep.name,
                    info.distribution,
                    info.error,
                )
                continue
            self.register(plugin, ep.name, info)

    def register(self, plugin: object, name: str, info: PluginInfo | None = None) -> bool:
        """Register ``plugin`` under ``name``, guarded; returns whether it was accepted."""
        info = info or self.plugins.setdefault(name, PluginInfo(name=name))
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:  # noqa: BLE001 - pluggy validation or a name clash
            info.error = f"{type(exc).__name__}: {exc}"
            log.warning("plugin %r is left out: %s", name, info.error)
            return False
        unknown = _unknown_hooks(self.pm, plugin)
        if unknown:
            self.pm.unregister(plugin)
            info.error = (
                f"implements hook(s) the contract does not define: {', '.join(unknown)} "
                f"(known hooks: {', '.join(c.name for c in vars(self.pm.hook).values() if c.spec)})"
            )
            log.warning("plugin %r is left out: %s", name, info.error)
            return False
        info.hooks = sorted(c.name for c in self.pm.get_hookcallers(plugin) or ())
        self._backends = None
        return True

    def unregister(self, name: str) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self.plugins.pop(name, None)
        self._backends = None

    # -- backends ------------------------------------------------------------------------------
    @property
    def backends(self) -> dict[str, BackendSpec]:
        """Every backend offered by a loaded plugin, by name (plugin load order)."""
        if self._backends is None:
            registrar = BackendRegistrar()
            for impl in self._ordered_impls("register_backends"):
                registrar.plugin = impl.plugin_name
                info = self.plugins.get(impl.plugin_name)
                registrar.distribution = info.distribution if info is not None else None
                try:
                    self._only(impl.plugin, "register_backends")(register=registrar)
                except Exception as exc:  # noqa: BLE001
                    info = self.plugins.get(impl.plugin_name)
                    if info is not None:
                        info.error = f"register_backends raised {type(exc).__name__}: {exc}"
                    log.warning(
                        "plugin %r failed to register its backends: %s", impl.plugin_name, exc
                    )
            for spec in registrar.specs.values():
                info = self.plugins.get(spec.plugin)
                if info is None:
                    continue
                if spec.name not in info.backends:
                    info.backends.append(spec.name)
                missing = spec.missing()
                if missing:  # said as selecting it would say it (BackendUnavailable)
                    info.missing[spec.name] = str(
                        BackendUnavailable(spec.name, missing, spec.extra, spec.install_command(missing))
                    )
                else:
                    info.missing.pop(spec.name, None)
            self._backends = registrar.specs
        return self._backends

    def views(self, name: str) -> Views:
        """What backend ``name`` says about its runs: its registered views, or views that say
        nothing (a backend no installed plugin offers)."""
        spec = self.backends.get(name)
        return spec.views if spec is not None else Views()

    def select(self, names: Sequence[str], source: str | None = None) -> list[BackendSpec]:
        """The specs of the selected backends, or an error that says what to do (``source``:
        where the names came from, for the message)."""
        specs = self.backends
        for name in names:
            if name not in specs:
                info = self.plugins.get(name)
                if info is not None and info.error:
                    raise PluginLoadError(
                        f"tracking backend {name!r} comes from plugin {name!r} "
                        f"(distribution {info.distribution}), which failed to load: {info.error}"
                    )
                if info is not None and info.disabled:
                    raise PluginLoadError(
                        f"tracking backend {name!r} is disabled by {DISABLE_ENV}"
                    )
                failed = [n for n, i in self.plugins.items() if i.error]
                if source is None:
                    raise UnknownBackend(name, sorted(specs), failed)
                raise UnknownBackend(name, sorted(specs), failed, source)
        return check_selectable(specs, names)

    # -- ordered calls -------------------------------------------------------------------------
    def _ordered_impls(self, hook_name: str) -> list[Any]:
        """Implementations of ``hook_name`` in plugin registration order (built-ins first)."""
        caller = getattr(self.pm.hook, hook_name)
        order = {name: i for i, name in enumerate(self.plugins)}
        impls = list(caller.get_hookimpls())
        return sorted(impls, key=lambda impl: order.get(impl.plugin_name, len(order)))

    def _only(self, plugin: object, hook_name: str) -> Any:
        """A pluggy caller of ``hook_name`` that reaches ``plugin`` alone (traced like any
        other hook call); its result is that one implementation's, unwrapped."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        caller = self.pm.subset_hook_caller(hook_name, remove_plugins=others)

        def call(**kwargs: Any) -> Any:
            results = caller(**kwargs)
            return results[0] if isinstance(results, list) and results else None

        return call

    def add_options(self, parser: HostParser) -> None:
        """Every plugin's ``add_options``, in load order, each under its own guard: a plugin
        that raises is reported by name (a warning, and its error in ``tracking-core plugins``)
        and left out whole, the options it added before raising taken back off the parser; the
        other plugins' options are added and the host's parser setup goes on."""
        for impl in self._ordered_impls("add_options"):
            mark = parser.mark()
            try:
                self._only(impl.plugin, "add_options")(parser=parser)
            except Exception as exc:  # noqa: BLE001 - a plugin never breaks the host's parser
                taken = parser.take_back(mark)
                error = f"add_options raised {type(exc).__name__}: {exc}"
                info = self.plugins.get(impl.plugin_name)
                if info is not None:
                    info.error = error
                if impl.plugin_name in self._options_warned:
                    continue
                self._options_warned.add(impl.plugin_name)
                log.warning(
                    "plugin %r is left out of the command-line options: %s%s",
                    impl.plugin_name,
                    error,
                    f" (taken back: {', '.join(taken)})" if taken else "",
                )

    def commands(self, reserved: Collection[str] = ()) -> dict[str, Command]:
        """Every command the loaded plugins register, by name, in plugin load order. ``reserved``:
        the built-in commands' names, which no plugin may take. A plugin whose hook raises (a taken
        name included) is logged, its error recorded for ``tracking-core plugins``, and none of its
        commands is kept; the others are."""
        commands: dict[str, Command] = {}
        for impl in self._ordered_impls("register_commands"):
            owners = {name: "tracking-core" for name in reserved}
            owners.update({name: f"plugin {c.plugin!r}" for name, c in commands.items()})
            registrar = CommandRegistrar(impl.plugin_name, owners)
            try:
                self._only(impl.plugin, "register_commands")(register=registrar)
            except Exception as exc:  # noqa: BLE001 - one plugin never takes the CLI down
                error = f"register_commands raised {type(exc).__name__}: {exc}"
                info = self.plugins.get(impl.plugin_name)
                if info is not None:
                    info.error = error
                log.warning("plugin %r is left out of the commands: %s", impl.plugin_name, error)
                continue
            commands.update(registrar.commands)
        return commands

    def call_each(self, hook_name: str, **kwargs: Any) -> Iterable[tuple[str, Any]]:
        """Call every implementation of ``hook_name`` in load order, one at a time and each
        through pluggy, yielding ``(plugin name, result)``; one that raises is logged and
        skipped (a plugin never takes the caller or the other plugins down). Pass every
        argument of the hook's spec."""
        for impl in self._ordered_impls(hook_name):
            try:
                result = self._only(impl.plugin, hook_name)(**kwargs)
            except Exception as exc:  # noqa: BLE001 - a plugin never takes the caller down
                log.warning(
                    "plugin %r raised in %s: %s: %s",
                    impl.plugin_name,
                    hook_name,
                    type(exc).__name__,
                    exc,
                )
                continue
            yield impl.plugin_name, result


_manager: PluginManager | None = None
_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, loading entry points on first use."""
    global _manager
    with _lock:
        if _manager is None:
            manager = PluginManager()
            manager.load_entry_points()
            _manager = manager
        return _manager


def reset_plugin_manager() -> None:
    """Forget the loaded plugins (tests, or after installing a plugin in a running process)."""
    global _manager
    with _lock:
        _manager = None
