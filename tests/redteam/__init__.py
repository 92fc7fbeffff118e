"""Red-team suite: attacks on the sandbox, the budgets, the bookkeeping and the model adapter."""
