"""The probe's inference rules: how the gate builds a candidate and feeds it. They run inside the
sandboxed child (``probe.run``): constructor arguments guessed from signatures, names and code
(``arguments``), inputs for ``forward`` (``inputs``, ``documented``), repairs read off a failure
(``repairs``, ``shape_errors``, ``asserts``, ``frames``, ``source``), values that have the
attributes a guess lacks (``companions``), and weights a block fetches (``weights``). The gate,
the worker and the sandbox that run them are the package above."""
