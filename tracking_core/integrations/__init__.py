"""Thin adapters that make tracking-core the tracker of hosts with their own tracker interface.

* :mod:`.accelerate` — ``TrackingCoreTracker``, an Accelerate ``GeneralTracker``
  (``Accelerator(log_with="tracking_core")`` once tracking-core is imported, Accelerate >= 1.16;
  or ``Accelerator(log_with=[TrackingCoreTracker(run_name=...)])``);
* :mod:`.lightning` — ``TrackingCoreLogger``, a Lightning ``Logger``
  (``Trainer(logger=TrackingCoreLogger(...))``);
* :mod:`.host_run` — the run behind either of them.

Importing this package, or either adapter module, imports neither host library: the adapter
class is built from the host's base class when it is first used. verl has its own adapter
(``verl_integration``), slime too (``slime_integration``).
"""
