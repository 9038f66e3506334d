"""The analysis package: from a study database and team pools to tables, figures and a report.

One module per analysis domain: ``load`` (tidy frames from the database), ``sessions``
(per participant and condition), ``questionnaires``, ``fairness_time``, ``tradeoff``,
``parity``, ``simulation`` (pool comparisons), ``figures``, ``report`` and ``cli``.
Nothing here imports ``study.web``.
"""
