"""A benchmark's rows kept in a CSV (``--save FILE``) and its tables printed again from one
(``--from FILE``) without running anything: the pair bench_aids, bench_floors, bench_pool and
bench_split share."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def add_save_from(
    parser: argparse.ArgumentParser,
    save: str = "write the rows to this CSV",
    source: str = "print the tables of a saved CSV",
) -> None:
    """``--save FILE`` (``args.save``) and ``--from FILE`` (``args.source``), with these helps."""
    parser.add_argument("--save", default=None, help=save)
    parser.add_argument("--from", dest="source", default=None, help=source)


def save_rows(df: pd.DataFrame, path: str | None) -> None:
    """``df`` written to ``path`` (folders made), and how to print it again; nothing without a path."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)
        print(f"rows written to {path} (re-print: --from {path})")
