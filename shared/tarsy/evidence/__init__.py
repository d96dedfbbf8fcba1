"""Evidence first: what plain code gathers and reads before the model speaks.

``snapshot`` is what was seen (parsed tool results), ``detections`` the
findings plain code reads from it, ``catalog`` the collectors as data,
``gather`` the step that runs them, ``brief`` the opening message's evidence.
"""
