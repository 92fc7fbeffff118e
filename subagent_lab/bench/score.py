"""The scorer's result: how well one explore answer fits one task (``bench.scoring.score_run``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from subagent_lab.bench.locmetrics import ACC_KS

__all__ = ["LOC_COLUMNS", "Score"]


class Score(BaseModel):
    """How well one explore answer fits one task. Ratios lie in [0, 1].

    Evidence is counted as *items* (``bench.locmetrics.merge_items``): distinct citations, those of
    one file that overlap or touch merged into their union, in rank order (the order cited), only
    the first ``max_evidence`` of them. Every ratio over items below counts these.
    """

    task_id: str
    kind: str
    """The task's kind (``locate`` ... ``absent``, ``localize``)."""
    contract_valid: bool
    """The payload parsed as an ExploreResult; when False every metric below is zero."""
    errors: list[str] = Field(default_factory=list)
    """Why the contract check failed, if it did."""
    status: str | None = None
    """The child's own ``status`` (``completed`` or ``partial``)."""
    trace_checked: bool = False
    """A ``ScoringContext`` was given: harness wording and (where known) seen locations were checked."""
    evidence_count: int = 0
    """Evidence items as written, repeats included."""
    evidence_unique: int = 0
    """Distinct evidence items as written (same file and lines = one item), before merging."""
    evidence_counted: int = 0
    """Items counted: distinct items merged (overlapping or adjacent ranges of a file as one), the
    first ``max_evidence`` of them."""
    unseen_evidence: list[str] = Field(default_factory=list)
    """Distinct items outside every location the tools showed (with a context that knows them)."""
    grounded_ratio: float = 0.0
    """Share of evidence items pointing at real lines in the workspace (0 with no evidence)."""
    evidence_precision_file: float = 0.0
    """Share of counted, credited items whose file is a gold file (0 with no evidence)."""
    evidence_precision_line: float = 0.0
    """Span-hit precision: share of counted items overlapping a gold span within the tolerance."""
    gold_recall_file: float = 0.0
    """Share of gold spans whose file is cited by some credited item (1 with no gold)."""
    gold_recall_line: float = 0.0
    """Span recall: share of gold spans overlapped by a credited item within the tolerance."""
    strict_line_precision: float = 0.0
    """Share of counted items that are strict hits: overlap a gold span at tolerance 0 and are at
    most ``max(STRICT_MAX_LINES, span length)`` lines wide (0 with no evidence)."""
    strict_line_recall: float = 0.0
    """Share of gold spans strictly hit by some item (1 with no gold)."""
    gold_line_share: float = 0.0
    """Share of the gold lines that strict hits cover, line by line (1 with no gold)."""
    file_acc_at1: float | None = None
    """1 when every gold file is the file of one of the first credited item (LocAgent's Acc@1);
    this and the other localization columns are None for a task without gold."""
    file_acc_at3: float | None = None
    """File Acc@3: every gold file among the files of the first 3 items."""
    file_acc_at5: float | None = None
    """File Acc@5: every gold file among the files of the first 5 merged items (Acc@k looks at k
    items, past the ``max_evidence`` that the other ratios count)."""
    func_acc_at1: float | None = None
    """Function Acc@1: every gold span's function (``locmetrics.gold_of``) is the function of the
    first item (the innermost def holding its first line; a class outside any def)."""
    func_acc_at3: float | None = None
    """Function Acc@3."""
    func_acc_at5: float | None = None
    """Function Acc@5."""
    file_hit_at1: float | None = None
    """File hit@1: some gold file is the first item's file."""
    file_hit_at3: float | None = None
    """File hit@3."""
    file_hit_at5: float | None = None
    """File hit@5."""
    func_hit_at1: float | None = None
    """Function hit@1: some gold span's function is the first item's function."""
    func_hit_at3: float | None = None
    """Function hit@3."""
    func_hit_at5: float | None = None
    """Function hit@5."""
    unit_recall_at4: float | None = None
    """Share of gold spans *found* by one of the first 4 items: an item lying inside the span's
    innermost enclosing function when that function is at most 60 lines long (else inside the span
    when the span is), an item of at most 10 lines starting on the span's first line (its header),
    or an item holding at least half the span's lines and at most twice as wide
    (``locmetrics.unit_found``): a window that merely touches the span finds nothing."""
    unit_precision: float | None = None
    """Share of counted items that find a gold span by ``unit_recall_at4``'s rule that no earlier
    item found (the same function cited as several lines is one useful item)."""
    keyword_recall: float | None = 0.0
    """Creditable keywords found in summary + findings, over the countable ones (those not in the
    task's prompt); creditable: countable, in no harness text (``keywords_listed`` are not) and
    not only in tool output the answer cites no line of (``keywords_tool_only``). None when none is
    countable (then left out of ``quality``)."""
    keywords_in_task: list[str] = Field(default_factory=list)
    """Keywords not counted because the task text already contains them (restating earns nothing)."""
    keywords_listed: list[str] = Field(default_factory=list)
    """Countable keywords that earn nothing because a harness text (above all the final prompt's
    listing of candidate lines) holds them: they still count in ``keyword_recall``'s denominator."""
    keywords_tool_only: list[str] = Field(default_factory=list)
    """Keywords the answer names that earn nothing: they occur in text a tool printed and the answer
    cites no line that output showed (pasted, not found); still in the denominator."""
    admits_absence: bool = False
    """The answer says, in its own words (``own_words``), that the thing does not exist."""
    absence_restated: bool = False
    """An absence phrase occurs only inside wording copied from the task or the harness."""
    invented_evidence: bool = False
    """An ``absent`` task's answer cites evidence anyway."""
    missed_gold: list[str] = Field(default_factory=list)
    """Gold spans (``path:start-end``) no credited item hit at span level."""
    unmatched_evidence: list[str] = Field(default_factory=list)
    """Counted items that hit no gold span at span level (or were not credited)."""
    quality: float | None = 0.0
    """Overall score in [0, 1], None for a task that is not scored (no gold, not ``absent``);
    see ``score_run``."""
    quality_legacy: float = 0.0
    """The scorer before issue 19 (repeats counted, ±tolerance span hits, absence and keywords on
    the raw text); kept only to compare with figures reported before it."""


LOC_COLUMNS: tuple[str, ...] = (
    *(f"{grain}_{what}_at{k}" for grain in ("file", "func") for what in ("acc", "hit") for k in ACC_KS),
    "unit_recall_at4",
    "unit_precision",
)
"""The localization columns of ``Score``, all None for a task without gold."""
