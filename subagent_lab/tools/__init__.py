"""Tools the model can call. Read-only tools live here; writing tools belong to the main agent."""
