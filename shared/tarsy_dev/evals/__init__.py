"""Evaluations: demo-cluster scenarios run through the whole local pipeline, scored and reported.

``tarsy eval`` (and ``make eval``) starts the local stack (emulators, the real
functions, Pub/Sub push) with a switchable demo cluster as the ``kubernetes``
MCP server, investigates each chosen scenario with each chosen model, scores
every run against the scenario's expected facts (:mod:`tarsy_dev.evals.scorer`),
and writes a report shaped like HolmesGPT's published tables
(:mod:`tarsy_dev.evals.report`). Development only: no deployed function imports it.
"""
