"""A selected backend in one process: built on first use, registered as a plugin for the life
of the run, and called alone (pluggy validated its hook implementations at registration)."""

from __future__ import annotations

from typing import Any

from .context import RunContext
from .plugins import PluginManager
from .registry import BackendSpec


class BackendSlot:
    def __init__(self, spec: BackendSpec, context: RunContext, manager: PluginManager) -> None:
        self.spec = spec
        self.context = context
        self.manager = manager
        self.instance: Any = None
        self.plugin_name: str | None = None
        self._impls: dict[str, Any] = {}

    def _build(self) -> None:
        factory = self.spec.resolve_factory()
        instance = factory(self.context)
        name = self.spec.name
        n = 1
        while self.manager.pm.get_plugin(name) is not None or name in self.manager.plugins:
            n += 1
            name = f"{self.spec.name}#{n}"
        if not self.manager.register(instance, name):
            info = self.manager.plugins.pop(name, None)
            raise TypeError(
                f"backend {self.spec.name!r} (plugin {self.spec.plugin!r}) built an invalid "
                f"instance: {info.error if info else 'rejected by the plugin manager'}"
            )
        self.instance = instance
        self.plugin_name = name
        for caller in self.manager.pm.get_hookcallers(instance) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is instance:
                    self._impls[caller.name] = impl

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call this backend's implementation of ``hook`` (None if it has none)."""
        if self.instance is None:
            self._build()
        impl = self._impls.get(hook)
        if impl is None:
            return None
        return impl.function(**{k: kwargs[k] for k in impl.argnames if k in kwargs})

    def release(self) -> None:
        """Unregister the instance: a backend is a plugin only for the life of its run."""
        if self.plugin_name is not None:
            self.manager.unregister(self.plugin_name)
            self.plugin_name = None
