"""The scaffold: every aid of a small-model run as one small policy (``core.policy.Policy``).

Each module holds one aid, its state and its prompts; ``build`` turns a resolved profile's flat
fields into the loop's settings and the ordered policy tuple (the precedence, written once).
"""
