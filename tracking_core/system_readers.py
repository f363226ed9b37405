"""What a node's system sampler reads: the host's CPU, memory, disk and network counters (``/proc``
on Linux, psutil elsewhere) and its GPUs through NVML (``nvidia-ml-py``).

Readers only: :mod:`tracking_core.system_metrics` chooses the node's sampler and logs what these
return as ``system/<host>/...`` series.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .names import path_part

__all__ = ["GIB", "MIB", "Gpus", "HostReader", "HostSeries", "ProcReader", "PsutilReader", "Values", "host_reader", "mount_key", "mount_of"]

GIB = float(1 << 30)
MIB = float(1 << 20)

Values = dict[str, float]

log = logging.getLogger("tracking_core.system_metrics")


def mount_of(path: Path) -> str:
    """The mount point of the file system holding ``path`` (its nearest existing folder)."""
    here = Path(os.path.realpath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return str(here)


def mount_key(mount: str) -> str:
    """A mount point as one part of a series name: ``/`` -> ``root``, ``/data/x`` -> ``data_x``."""
    return path_part(mount.strip("/").replace("/", "_") or "root", "mount point")


# -- reading the host ----------------------------------------------------------------------------
class ProcReader:
    """The host's counters from ``/proc`` (Linux): what psutil reads there too, at a fraction
    of the cost and with no dependency."""

    source = "/proc"

    def cpu(self) -> tuple[float, float]:
        """Busy and total time of all CPUs so far (clock ticks)."""
        with open("/proc/stat", "rb") as fh:
            fields = fh.readline().split()
        if fields[:1] != [b"cpu"] or len(fields) < 5:
            raise ValueError(f"/proc/stat starts with {b' '.join(fields[:3])!r}, not the cpu line")
        ticks = [int(f) for f in fields[1:9]]  # user nice system idle iowait irq softirq steal
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        total = sum(ticks)
        return float(total - idle), float(total)

    def memory(self) -> tuple[float, float]:
        """Total and available memory in bytes."""
        found: dict[bytes, int] = {}
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                name, _, rest = line.partition(b":")
                if name in (b"MemTotal", b"MemAvailable"):
                    found[name] = int(rest.split()[0]) * 1024
                    if len(found) == 2:
                        break
        if len(found) < 2:
            raise ValueError(f"/proc/meminfo lacks {', '.join(n for n in ('MemTotal', 'MemAvailable') if n.encode() not in found)}")
        return float(found[b"MemTotal"]), float(found[b"MemAvailable"])

    def network(self) -> tuple[float, float]:
        """Bytes sent and received so far by every interface but loopback."""
        sent = recv = 0
        with open("/proc/net/dev", "rb") as fh:
            lines = fh.read().splitlines()[2:]
        for line in lines:
            name, _, rest = line.partition(b":")
            if name.strip() == b"lo":
                continue
            fields = rest.split()
            recv += int(fields[0])
            sent += int(fields[8])
        return float(sent), float(recv)


class PsutilReader:
    """The host's counters from psutil, where there is no ``/proc``."""

    source = "psutil"

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil

    def cpu(self) -> tuple[float, float]:
        times = self._psutil.cpu_times()
        total = sum(times)
        idle = times.idle + getattr(times, "iowait", 0.0)
        return total - idle, total

    def memory(self) -> tuple[float, float]:
        memory = self._psutil.virtual_memory()
        return float(memory.total), float(memory.available)

    def network(self) -> tuple[float, float]:
        sent = recv = 0
        for name, counters in self._psutil.net_io_counters(pernic=True).items():
            if name.startswith("lo") or "loopback" in name.lower():
                continue
            sent += counters.bytes_sent
            recv += counters.bytes_recv
        return float(sent), float(recv)


HostReader = ProcReader | PsutilReader


def host_reader(prefer: str | None = None) -> tuple[HostReader | None, str]:
    """The reader of the host's counters (``/proc`` on Linux, else psutil; ``prefer`` names one)
    and, when there is none, why."""
    if prefer != "psutil" and (prefer == "/proc" or sys.platform.startswith("linux")):
        return ProcReader(), ""
    try:
        return PsutilReader(), ""
    except ImportError:
        return None, f'host series need psutil on {sys.platform} (pip install psutil)'


class HostSeries:
    """The host's series from a reader: rates and shares over the time since the last read."""

    def __init__(self, reader: HostReader, disk: Path) -> None:
        self.reader = reader
        self.disk = disk
        self.mount = mount_of(disk)
        self.disk_key = f"disk/{mount_key(self.mount)}/used_percent"
        self._cpu = _quietly(reader.cpu)
        self._net = _quietly(reader.network)
        self._net_at = time.monotonic()

    def parts(self) -> list[tuple[str, Callable[[], Values]]]:
        return [("cpu", self.cpu), ("memory", self.memory), ("disk", self.disk_used), ("network", self.network)]

    def cpu(self) -> Values:
        busy, total = self.reader.cpu()
        last, self._cpu = self._cpu, (busy, total)
        if last is None or total <= last[1]:
            return {}
        return {"cpu/utilization": _percent(busy - last[0], total - last[1])}

    def memory(self) -> Values:
        total, available = self.reader.memory()
        used = max(0.0, total - available)
        return {"memory/used_percent": _percent(used, total), "memory/used_gib": used / GIB}

    def disk_used(self) -> Values:
        stat = os.statvfs(self.disk)  # the folder itself: a tracking directory gone is a failure
        used = (stat.f_blocks - stat.f_bfree) * stat.f_frsize
        room = used + stat.f_bavail * stat.f_frsize  # what a user may fill, as df counts it
        return {self.disk_key: _percent(used, room)}

    def network(self) -> Values:
        now = time.monotonic()
        sent, recv = self.reader.network()
        last, last_at = self._net, self._net_at
        self._net, self._net_at = (sent, recv), now
        if last is None or now <= last_at:
            return {}
        seconds = now - last_at
        return {
            "network/sent_mib_s": max(0.0, sent - last[0]) / MIB / seconds,
            "network/recv_mib_s": max(0.0, recv - last[1]) / MIB / seconds,
        }

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host_source": self.reader.source, "cpus": os.cpu_count() or 0, "disk": self.mount}
        memory = _quietly(self.reader.memory)
        if memory is not None:
            out["memory_gib"] = round(memory[0] / GIB, 2)
        return out


# -- reading the GPUs ----------------------------------------------------------------------------
class Gpus:
    """Every GPU NVML sees on the node, by its NVML index. A value a GPU does not support
    (power on some boards, utilisation of a MIG-partitioned one) is left out from then on."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self.nvml = nvml
        self.handles = handles
        self.unsupported: set[tuple[int, str]] = set()
        self.reads: dict[str, Callable[[Any], float]] = {
            "utilization": lambda h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu),
            "memory_used_gib": lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used / GIB,
            "power_w": lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temperature_c": self._temperature,
        }
        self._temperature_v = hasattr(nvml, "nvmlDeviceGetTemperatureV")

    def _temperature(self, handle: Any) -> float:
        """The GPU's temperature: NVML's current call where the driver has it, else the one
        it deprecates (older drivers)."""
        nvml = self.nvml
        if self._temperature_v:
            try:
                return float(nvml.nvmlDeviceGetTemperatureV(handle, nvml.NVML_TEMPERATURE_GPU))
            except nvml.NVMLError_FunctionNotFound:
                self._temperature_v = False
        return float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))

    @classmethod
    def open(cls) -> tuple[Gpus | None, str]:
        """The node's GPUs, or None and why not (no binding, no driver, no GPU)."""
        try:
            import pynvml
        except ImportError:
            return None, 'no NVML binding (pip install nvidia-ml-py)'
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return None, f"NVML is not usable here ({exc})"
        try:
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:  # noqa: BLE001
            _nvml_shutdown(pynvml)
            return None, f"NVML cannot list the GPUs ({exc})"
        if not handles:
            _nvml_shutdown(pynvml)
            return None, "NVML finds no GPU"
        return cls(pynvml, handles), ""

    def read(self, failed: Callable[[str, BaseException], None]) -> Values:
        out: Values = {}
        for index, handle in enumerate(self.handles):
            for name, read in self.reads.items():
                if (index, name) in self.unsupported:
                    continue
                try:
                    out[f"gpu{index}/{name}"] = read(handle)
                except self.nvml.NVMLError_NotSupported:
                    self.unsupported.add((index, name))
                    log.info("system metrics: GPU %d does not report %s; that series is left out", index, name)
                except Exception as exc:  # noqa: BLE001 - a GPU NVML lost: the others go on
                    failed(f"gpu{index}", exc)
        return out

    def facts(self) -> dict[str, Any]:
        names = []
        for handle in self.handles:
            try:
                name = self.nvml.nvmlDeviceGetName(handle)
            except Exception:  # noqa: BLE001 - a name is a nicety
                name = "?"
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return {"gpus": len(self.handles), "gpu_names": ", ".join(names)}

    def close(self) -> None:
        _nvml_shutdown(self.nvml)


def _nvml_shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


# -- the sampler ---------------------------------------------------------------------------------


# -- small helpers -------------------------------------------------------------------------------
def _percent(part: float, whole: float) -> float:
    return 0.0 if whole <= 0 else min(100.0, max(0.0, 100.0 * part / whole))


def _quietly(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - a first reading: the sample says it if it fails again
        return None
