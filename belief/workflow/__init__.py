"""The statistician's path: evidence tables → :class:`~belief.workflow.fitted.FittedBelief`
(q_t, posteriors, evidence, candidate file) → saved, loaded and checked belief files → a
decision → a report.  What ``belief fit``, ``check``, ``decide`` and ``report`` call."""
