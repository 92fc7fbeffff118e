"""The symbol index of a workspace and the tools, search and map built on it.

``index.py`` builds and caches the index (tree-sitter definitions, Python references from
``ast``); ``tools.py`` has Find, Refs, Outline and Search; ``search.py`` the BM25 ranking and the
retrieval-only answer; ``repo_map.py`` the PageRank-ranked map of a workspace.
"""

SYMBOL_TOOLS: tuple[str, ...] = ("Find", "Refs", "Outline", "Search")
"""The symbol index's tools (``tools.py``), small-model interface only; read-only."""
