"""The analysis package: from a study database and team pools to tables, figures and a report.

One module per analysis domain: ``load`` (tidy frames from the database), ``design``
(the protocol's design and declared exclusion rules), ``flow`` (participant flow and the
analysis set), ``pooling`` (several databases), ``sessions`` (per participant and
condition), ``models`` (the within-subject models), ``questionnaires``, ``fairness_time``,
``metrics`` (the seed papers' metrics), ``tradeoff``, ``parity``, ``simulation`` (pool
comparisons), ``plan`` (simulated power for the next study), ``figures``, ``report`` and
``cli``.
Nothing here imports ``study.web``.
"""
