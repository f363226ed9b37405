"""The one delivery path, from the training thread to every tracker.

* :mod:`.intake` — the training process's side: the caller appends, a pump numbers and journals;
* :mod:`.journal` — the journal's format: segments, acknowledgements, locks;
* :mod:`.progress` — how far each backend is: what "done" means, the completion rule;
* :mod:`.stream` — one backend's records in journal order (from disk, or memory on a full disk);
* :mod:`.worker` — one backend's delivery: pluggy calls, retries, circuit breaker, isolation;
* :mod:`.follower` — delivers one journal to all its backends; the same in every mode;
* :mod:`.plan` — what a follower needs, as plain data;
* :mod:`.modes`, :mod:`.client`, :mod:`.process` — the follower in a delivery process or on a
  thread; :mod:`.messages` — what crosses their pipes, as types;
* :mod:`.sync` — ``tracking-core sync`` and a finishing primary's wait for its peers;
* :mod:`.isolation` — ``tracking-core sync``'s delivery of each tracker in a process of its own.
"""
