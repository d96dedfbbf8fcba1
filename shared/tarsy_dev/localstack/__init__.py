"""The local stack: emulators, functions-framework processes and the wiring between them.

Used by ``make up``/``make demo``/``make down`` and by the integration tests, so
both run the same processes the same way.
"""
