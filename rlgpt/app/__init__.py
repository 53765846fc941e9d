"""The composition root: what starts and wires the services (the ``rlgpt`` command, ``rlgpt serve``, ``rlgpt
run``'s local services and the launcher that starts them). The only package of rlgpt/ that imports services;
the library modules beside it import none (tests/unit/rlgpt/test_layout.py)."""
