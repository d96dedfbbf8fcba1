"""LLM providers behind one streaming interface (seed 000, seed 003 GenerateRequest/Response).

The package re-exports nothing: its modules are imported by name
(``tarsy.llm.base`` for the types, ``tarsy.llm.registry`` for ``get_provider``),
so a function that needs only the request and tool types (ingest, the api) does
not import the providers, their retry policy or the backend tables with them.
"""
