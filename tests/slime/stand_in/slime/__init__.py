"""A stand-in for slime in tests: only the module paths and signatures its tracking goes through.

Modelled on THUDM/slime@624b824a. The functions record their calls in
``slime.observability.logging_utils.ORIGINAL_CALLS``, so a test can tell slime's own tracking from
tracking-core's drop-ins.
"""
