"""The kinds of step, one class each: what a claimed step does between its claim and its commit.

Design constraint: adding a kind of step is one class with a ``work`` method
(:class:`tarsy.engine.step_kinds.base.StepKind`) and its tests; the claim, the
lease heartbeat, the commit, a lost commit and the publish stay in
:func:`tarsy.engine.steps.run_claimed`, written once for every kind.

- :class:`~tarsy.engine.step_kinds.model_turn.ModelTurn`: one model call and its
  tools; a turn that messages sub-agents ends waiting for their answers.
- :class:`~tarsy.engine.step_kinds.gather_turn.GatherTurn`: the evidence gathered
  before an investigating agent's first model call.
- :class:`~tarsy.engine.step_kinds.collect_answers.CollectAnswers`: a waiting
  turn completed with its sub-agents' answers.

No re-exports here: :mod:`tarsy.engine.commits` imports ``base`` from this package.
"""
