"""Session commands: what a person, a sender or a scheduler can do to a session.

Design constraint: every door (the api, ingest's alert routes and Slack, the
web pages, the CLI's local paths) calls these same commands over
:class:`~tarsy.app.Deps`; no door imports another. A door parses, checks who
calls and renders; a command checks the session's state, writes (a command
that changes a session commits its audit record in the same batch,
:mod:`tarsy.commands.recorded`) and publishes. Commands sit below the doors
and above the engine and persistence:

* :mod:`tarsy.commands.start`: a new session from an alert, and the one
  publish-or-rollback of its start;
* :mod:`tarsy.commands.sessions`: cancel, cancel an agent, resume, rescore,
  chat, investigate again, feedback, erase, and the session's view;
* :mod:`tarsy.commands.scheduled`: the sweep and the retention pass;
* :mod:`tarsy.commands.recorded`: an action's audit record in its commit.
"""
