"""The laboratory: what measures the engine but is no part of it — the clairvoyant planner
on a synthetic world's truth (the limit V*), small beta-binomial problems with their
Bayes-optimal policies and the policies valued exactly on them, and the calibration harness
(coverage of intervals and decisions on synthetic worlds).

Imported by ``benchmarks/``, ``tests/`` and ``notebooks/`` only; no product package
(inputs, posterior, decision, workflow, campaign, report, cli) imports it
(``tests/test_architecture.py``).
"""
