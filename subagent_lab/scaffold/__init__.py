"""The scaffold: every aid of a small-model run as one small policy (``core.policy.Policy``).

Each module holds one aid, its state and its prompts; ``specs`` holds the precedence (written
once), validates a policy spec's parameters against the policy's own fields and builds the
ordered policy tuple.
"""
