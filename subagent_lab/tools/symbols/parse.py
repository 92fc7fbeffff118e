"""One source file into its definitions (tree-sitter) and, for Python, its references (``ast``).

Definitions come from tree-sitter queries run in C (Python, JavaScript, TypeScript/TSX, Go): each
has its name, qualified name (``Class.method``), kind, line range, signature and first docstring
line, plus the terms a lexical search indexes it by. Python references come from the language's
own parser: calls, imports, attribute access, assignments and base classes, by name and line.
Nothing here knows about paths or workspaces; ``index.py`` feeds it bytes.
"""

from __future__ import annotations

import ast
import re
import warnings
from array import array
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from subagent_lab.tools.symbols.terms import unit_terms

Kind = Literal["class", "function", "method", "constant"]
RefKind = Literal["call", "import", "attribute", "assign", "subclass", "use", "method call"]
REF_KINDS: tuple[RefKind, ...] = ("call", "import", "attribute", "assign", "subclass", "use", "method call")
"""A reference's kind is stored as its index here (``line * 8 + index``)."""

LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx", ".go": "go",
}  # fmt: skip
"""File suffix -> the grammar that parses it."""
SIGNATURE_CHARS = 200
"""Longest signature kept (a longer one is cut with an ellipsis)."""
DOC_CHARS = 160
"""Longest first docstring line kept."""

_QUERIES: dict[str, str] = {
    "python": """
        (class_definition name: (identifier) @name) @class
        (function_definition name: (identifier) @name) @function
        (module (expression_statement (assignment left: (identifier) @name)) @constant)
    """,
    "javascript": """
        (class_declaration name: (_) @name) @class
        (function_declaration name: (identifier) @name) @function
        (generator_function_declaration name: (identifier) @name) @function
        (method_definition name: (_) @name) @method
        (lexical_declaration (variable_declarator name: (identifier) @name
            value: [(arrow_function) (function_expression)])) @function
    """,
    "go": """
        (function_declaration name: (identifier) @name) @function
        (method_declaration name: (field_identifier) @name) @method
        (type_declaration (type_spec name: (type_identifier) @name)) @class
        (const_declaration (const_spec name: (identifier) @name)) @constant
    """,
}
_QUERIES["typescript"] = _QUERIES["tsx"] = (
    _QUERIES["javascript"]
    + """
    (abstract_class_declaration name: (_) @name) @class
    (interface_declaration name: (_) @name) @class
    (type_alias_declaration name: (_) @name) @class
"""
)
_SCOPES = frozenset({
    "class_definition", "function_definition", "class_declaration", "abstract_class_declaration",
    "function_declaration", "method_definition", "interface_declaration",
})  # fmt: skip
"""Node types whose name prefixes the qualified names of the definitions inside them."""
_CLASS_SCOPES = frozenset({"class_definition", "class_declaration", "abstract_class_declaration"})
_CONSTANT_NAME = re.compile(r"^_?[A-Z][A-Za-z0-9_]*$")
"""A module-level name bound once and read elsewhere: UPPER_CASE constants and CamelCase aliases."""


@dataclass(frozen=True, slots=True)
class Definition:
    """One definition in a file (lines are 1-based and inclusive)."""

    name: str
    qualname: str
    kind: Kind
    start: int
    end: int
    signature: str
    doc: str
    terms: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The words a search indexes the unit by (see ``terms.unit_terms``)."""


@dataclass(slots=True)
class FileParse:
    """What one file holds: its definitions in line order and its references by name."""

    language: str
    lines: int
    definitions: list[Definition]
    refs: dict[str, array[int]] = field(default_factory=dict)
    """Referenced name -> ``line * 8 + REF_KINDS.index(kind)`` for each reference (Python only).
    ``call`` is a call of a plain name, ``method call`` one of ``x.name(...)``."""
    imports: dict[str, str] = field(default_factory=dict)
    """Local name -> the dotted name it was imported as (``Loader`` -> ``jinja2.loaders.Loader``)."""
    module_attrs: dict[str, dict[str, int]] = field(default_factory=dict)
    """Imported module -> attribute name -> how many references go through it (``t.Tuple`` after
    ``import typing as t``: ``{"typing": {"Tuple": 1}}``), so a map can tell another package's
    names from the workspace's own."""
    error: str = ""
    """Why the file could not be parsed fully ('' if it could)."""


@cache
def _language(name: str) -> Any:
    import tree_sitter

    if name == "python":
        import tree_sitter_python as py_grammar

        return tree_sitter.Language(py_grammar.language())
    if name == "javascript":
        import tree_sitter_javascript as js_grammar

        return tree_sitter.Language(js_grammar.language())
    if name in ("typescript", "tsx"):
        import tree_sitter_typescript as ts_grammar

        pointer = ts_grammar.language_typescript() if name == "typescript" else ts_grammar.language_tsx()
        return tree_sitter.Language(pointer)
    import tree_sitter_go as go_grammar

    return tree_sitter.Language(go_grammar.language())


@cache
def _query(name: str) -> Any:
    import tree_sitter

    return tree_sitter.Query(_language(name), _QUERIES[name])


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scope_names(node: Any) -> tuple[list[str], str]:
    """(names of the enclosing scopes, outermost first; the type of the nearest one or '')."""
    names: list[str] = []
    nearest = ""
    parent = node.parent
    while parent is not None:
        if parent.type in _SCOPES:
            name = parent.child_by_field_name("name")
            if name is not None:
                names.append(name.text.decode("utf-8", "replace"))
                nearest = nearest or parent.type
        parent = parent.parent
    return names[::-1], nearest


def _python_doc(node: Any) -> str:
    body = node.child_by_field_name("body")
    first = body.named_children[0] if body is not None and body.named_children else None
    if first is None or first.type != "expression_statement" or not first.named_children:
        return ""
    string = first.named_children[0]
    if string.type != "string":
        return ""
    text = re.sub(r"^[rRbBuUfF]*('''|\"\"\"|'|\")", "", string.text.decode("utf-8", "replace"))
    text = re.sub(r"('''|\"\"\"|'|\")$", "", text)
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _comment_doc(node: Any) -> str:
    """The comment right above a JS/TS/Go definition (its doc comment), first line of text."""
    before = node.prev_named_sibling
    if node.parent is not None and node.parent.type in ("export_statement",):
        before = node.parent.prev_named_sibling
    if before is None or before.type != "comment" or before.end_point[0] < node.start_point[0] - 1:
        return ""
    text = before.text.decode("utf-8", "replace")
    for line in text.splitlines():
        line = line.strip().lstrip("/*").strip()
        if line:
            return line
    return ""


def _signature(source: bytes, node: Any) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    head = source[node.start_byte : end].decode("utf-8", "replace")
    if body is None:
        head = head.split("\n", 1)[0]
    head = re.sub(r"([(\[])\s+", r"\1", " ".join(head.split()))
    head = re.sub(r",?\s+([)\]])", r"\1", head)  # a signature laid out one parameter a line
    return _one_line(head, SIGNATURE_CHARS).rstrip(":{ ").rstrip()


def _definition(source: bytes, language: str, kind: str, node: Any, name_node: Any) -> Definition | None:
    name = name_node.text.decode("utf-8", "replace")
    scopes, nearest = _scope_names(node)
    outer = node.parent if kind == "constant" else node
    if language == "go" and kind == "method":
        receiver = node.child_by_field_name("receiver")
        found = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*\)$", receiver.text.decode()) if receiver else None
        scopes = [found.group(1)] if found else []
    elif kind == "function" and nearest in _CLASS_SCOPES:
        kind = "method"
    if kind == "constant":
        if language == "python" and (scopes or not _CONSTANT_NAME.match(name)):
            return None
        outer = node
    while outer.parent is not None and outer.parent.type in ("decorated_definition", "export_statement"):
        outer = outer.parent  # decorators and `export` belong to the unit
    doc = (_python_doc(node) if kind != "constant" else "") if language == "python" else _comment_doc(node)
    if kind == "constant":
        signature = _one_line(node.text.decode("utf-8", "replace").split("\n", 1)[0], SIGNATURE_CHARS)
    else:
        signature = _signature(source, node)
    return Definition(
        name=name,
        qualname=".".join([*scopes, name]),
        kind=kind,  # type: ignore[arg-type]  # one of Kind, by the query's capture names
        start=outer.start_point[0] + 1,
        end=max(outer.end_point[0] + (0 if outer.end_point[1] == 0 else 1), outer.start_point[0] + 1),
        signature=signature,
        doc=_one_line(doc, DOC_CHARS),
    )


def definitions(source: bytes, language: str) -> tuple[list[Definition], str]:
    """The definitions of a file in line order, and an error note if the parse had errors."""
    import tree_sitter

    parser = tree_sitter.Parser(_language(language))
    tree = parser.parse(source)
    found: list[Definition] = []
    seen: set[tuple[int, int]] = set()
    for _, captures in tree_sitter.QueryCursor(_query(language)).matches(tree.root_node):
        kinds = [k for k in captures if k != "name"]
        if not kinds or "name" not in captures:
            continue
        kind = kinds[0]
        node, name_node = captures[kind][0], captures["name"][0]
        if (node.id, name_node.id) in seen:
            continue
        seen.add((node.id, name_node.id))
        made = _definition(source, language, kind, node, name_node)
        if made is not None:
            found.append(made)
    found.sort(key=lambda d: (d.start, -d.end))
    note = "the file has syntax errors; definitions were read around them" if tree.root_node.has_error else ""
    return found, note


# --- Python references -------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for an attribute chain on a name ('' when the chain starts elsewhere)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAF_FIELDS = frozenset({"ctx", "op", "id", "attr", "name", "asname", "module", "level", "arg", "kind"})


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of an ast node class that can hold child nodes (not ``ctx``, ``op`` or names)."""
    known = _CHILD_FIELDS.get(cls)
    if known is None:
        fields: tuple[str, ...] = getattr(cls, "_fields", ())
        known = _CHILD_FIELDS[cls] = tuple(f for f in fields if f not in _LEAF_FIELDS)
    return known


def python_refs(
    source: bytes, own_names: set[str]
) -> tuple[dict[str, array[int]], dict[str, str], dict[str, dict[str, int]], str]:
    """(references by name, imports by local name, references through an imported name by its
    dotted source, error note) of a Python file.

    A plain name that is read, called or assigned counts only when the file imports or defines
    it (``own_names`` are its definitions): the rest are locals and builtins. Attribute names
    (``x.load(...)``, ``self.cache = ...``) and base classes always count.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old code are not our concern
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return {}, {}, {}, f"Python could not parse it ({type(exc).__name__}); no references indexed"
    found: dict[str, array[int]] = {}
    imports: dict[str, str] = {}
    through: list[tuple[str, str]] = []  # (name, attribute) of each `name.attribute`

    def add(name: str, kind: int, line: int) -> None:
        codes = found.get(name)
        if codes is None:
            codes = found[name] = array("I")
        codes.append(line * 8 + kind)

    handled: set[int] = set()  # nodes already counted as a call or a base class
    called: set[int] = set()  # plain names that are called
    names: list[ast.Name] = []
    stack: list[Any] = [tree]
    while stack:  # pre-order: a node is seen before its children (a Call before its func)
        node = stack.pop()
        cls = type(node)
        if cls is ast.Name:
            if id(node) not in handled:
                names.append(node)
            continue
        if cls is ast.Attribute:
            if id(node) not in handled:
                add(node.attr, 3 if type(node.ctx) is ast.Store else 2, node.lineno)
                if type(node.value) is ast.Name:
                    through.append((node.value.id, node.attr))
        elif cls is ast.Call:
            func = node.func
            if type(func) is ast.Attribute:
                add(func.attr, 6, func.lineno)
                handled.add(id(func))
                if type(func.value) is ast.Name:
                    through.append((func.value.id, func.attr))
            elif type(func) is ast.Name:
                names.append(func)
                handled.add(id(func))
                called.add(id(func))
        elif cls is ast.ClassDef:
            for base in node.bases:
                target = base.func if type(base) is ast.Call else base
                if type(target) is ast.Attribute:
                    add(target.attr, 4, target.lineno)
                    handled.add(id(target))
                elif type(target) is ast.Name:
                    add(target.id, 4, target.lineno)
                    handled.add(id(target))
        elif cls is ast.Import:
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                imports[local] = alias.name if alias.asname else local
                add(alias.name.rsplit(".", 1)[-1], 1, node.lineno)
            continue
        elif cls is ast.ImportFrom:
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name != "*":
                    imports[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
                    add(alias.name, 1, node.lineno)
            continue
        elif cls is ast.Constant:
            continue
        for field_name in _child_fields(cls):
            value = getattr(node, field_name, None)
            if type(value) is list:
                stack.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)
    known = own_names | imports.keys()
    for name in names:
        if name.id in known:
            kind = 0 if id(name) in called else 3 if isinstance(name.ctx, ast.Store) else 5
            add(name.id, kind, name.lineno)
    module_attrs: dict[str, dict[str, int]] = {}
    for owner, attribute in through:
        if owner in imports:
            counts = module_attrs.setdefault(imports[owner], {})
            counts[attribute] = counts.get(attribute, 0) + 1
    return found, imports, module_attrs, ""


def parse_source(source: bytes, language: str) -> FileParse:
    """The definitions (and for Python the references) of one file's bytes."""
    defs, note = definitions(source, language)
    lines = source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1)
    text_lines = source.decode("utf-8", "replace").splitlines()
    with_terms = [
        Definition(
            d.name, d.qualname, d.kind, d.start, d.end, d.signature, d.doc, unit_terms(d, text_lines, defs)
        )
        for d in defs
    ]
    parsed = FileParse(language=language, lines=lines, definitions=with_terms, error=note)
    if language == "python":
        parsed.refs, parsed.imports, parsed.module_attrs, error = python_refs(source, {d.name for d in defs})
        parsed.error = parsed.error or error
    return parsed
