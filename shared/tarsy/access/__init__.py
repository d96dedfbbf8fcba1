"""Who is asking, and what they may do: sign-in through Identity-Aware Proxy, roles, audit.

Design constraint: a person is known only by the assertion Identity-Aware
Proxy signs (``x-goog-iap-jwt-assertion``), verified on every api request with
google-auth, so a request that bypasses the proxy is refused; the API key is a
machine's credential for ingest and never opens the api or the pages. Roles
(:mod:`tarsy.access.roles`) come from configuration and are pure functions of
the verified e-mail; :mod:`tarsy.access.iap` verifies; :mod:`tarsy.access.audit`
says how an action is recorded on its session.
"""
