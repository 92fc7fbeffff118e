"""What a grid supplies to the grid engine (``experiments.grid``): its spec, its cells, their rows.

A module of its own so that the engine and the cluster (which the engine calls) both read it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from subagent_lab.agents.launcher import ModelFactory
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.stamp import Provenance

__all__ = ["C", "Grid", "GridCell", "GridSpec", "Row"]

Row = dict[str, Any]


class GridSpec(Protocol):
    """What the engine reads of a grid's spec: its name and key (the directory) and its JSON."""

    @property
    def name(self) -> str: ...

    def key(self) -> str: ...

    def model_dump_json(self, *, indent: int | None = None) -> str: ...


class GridCell(Protocol):
    """What the engine and a cluster worker read of a cell: its key and where its run reads and writes."""

    @property
    def run_key(self) -> str: ...

    @property
    def config_path(self) -> str | None: ...

    @property
    def trace_dir(self) -> str: ...

    @property
    def cache_dir(self) -> str | None: ...

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any: ...


C = TypeVar("C", bound=GridCell)


class Grid(ABC, Generic[C]):
    """A grid of cells: the spec it is keyed by, its provenance, its cells and how one runs.

    A grid travels to Dask workers (pickled), so it holds its spec and factories, nothing open.
    """

    spec: GridSpec
    model_factory: ModelFactory | None = None
    """A factory serving every model (tests, demos); None: the configured models."""

    def check(self, lab: LabConfig) -> None:
        """Raise before anything is written when the grid cannot run (a bad override, a task)."""

    @abstractmethod
    def provenance(self, lab: LabConfig) -> Provenance:
        """What produced the grid's rows (computed once per ``run_grid``)."""

    @abstractmethod
    def cells(self, lab: LabConfig, out: Path, prov: Provenance) -> list[C]:
        """Every cell, in the order they are submitted, stamped from ``prov``, writing under ``out``."""

    @abstractmethod
    def execute(self, cell: C, factory: ModelFactory | None = None) -> Row:
        """Run one cell and return its row; never raises. ``factory``: a cluster worker's, serving
        the configured models through its cache (None: the grid's own)."""

    @abstractmethod
    def identity(self, cell: C) -> Row:
        """The columns of a cell's row that only the driver may say (a failed row is these and why)."""

    @abstractmethod
    def models(self, cells: list[C]) -> set[ModelChoice]:
        """The model choices ``cells`` run (the server is started for the embedded ones)."""
