"""``make chaos``: the fault-injection suite; see ``bench/chaos/__main__.py``."""
