"""The browser view of sessions, served by the api function under ``/ui/``.

Design constraint: the api function is the only server (no long-lived
process), so every page is a static shell plus fragments the page polls for.
The shells and assets hold no session data and need no key; every fragment
and every action needs the API key, as the api routes do, sent by the page's
script in a header (the key lives in the browser's sessionStorage, never in a
URL). Templates and assets ship inside the package, so the api archive holds
them. Only :mod:`tarsy.web.links` is light enough for other modules to import.
"""
