"""Regression data from a CSV file (``csv:PATH``), cleaned as Farokhi does.

This module holds ``load_csv``: it reads a CSV file with a header row (e.g.
Lending Club's loan.csv), drops identifier, free-text, mostly missing and
constant columns, integer-codes categorical ones, keeps a seeded subset of the
complete rows and returns a regression ``Dataset`` split and standardized like
the other tabular sets; ``CSV_PREFIX`` marks such a name for ``load``.

Cleaning, as Farokhi (Sec. 4) describes it for the Lending Club data, with
the choices the paper leaves open made explicit:

1. Rows whose field count differs from the header's (e.g. summary lines at
   the end of the file) are skipped.
2. Columns named in ``CSV_DROP`` (identifiers, the listing's web address,
   free text) or in ``drop`` are dropped, and so are columns missing
   (empty, NA, N/A, NaN, null, None; case-insensitive) in more than half of
   the rows: otherwise the next step would drop almost every row.
3. Rows missing any remaining value are dropped; a seeded random subset of
   ``n_samples`` of them is kept, in file order (all if None or fewer).
4. Each column is parsed as numbers ("13.56%" -> 13.56). A column that does
   not parse is categorical and becomes integer codes (its distinct values
   in sorted order -> 0, 1, ...), unless more than half of its (kept) values
   are distinct: that is free text or an identifier, and it is dropped.
   Constant columns are dropped. The target must parse as numbers.

Then, as for the other tabular sets: seeded train/test split, features (and
by default the target) standardized with train statistics. The file is read
twice, streaming, so memory is O(rows x columns) booleans plus the kept rows.
"""

import csv
from typing import Iterator

import numpy as np

from experiments.common.data._dataset import Dataset
from experiments.common.data._dataset import split_and_standardize
from experiments.common.data._dataset import subset

CSV_PREFIX = 'csv:'
CSV_DROP = ('id', 'member_id', 'url', 'desc', 'title', 'emp_title')
"""Lending Club's identifier, web-address and free-text columns (dropped)."""
_CSV_MISSING = frozenset(('', 'na', 'n/a', 'nan', 'null', 'none'))
_CSV_MAX_MISSING_FRACTION = 0.5
_CSV_MAX_DISTINCT_FRACTION = 0.5
CSV_OPTIONS = ('target', 'n_samples', 'drop', 'test_fraction', 'max_train',
               'max_test', 'standardize_targets')


def _csv_number(text: str) -> float:
  """'13.56%' -> 13.56, ' 3.0 ' -> 3.0; ValueError if not a number."""
  text = text.strip()
  if text.endswith('%'):
    text = text[:-1]
  return float(text)


def _rows(path: str) -> Iterator[list[str]]:
  """The header (its names stripped), then every row as read."""
  with open(path, newline='', encoding='utf-8', errors='replace') as f:
    reader = csv.reader(f)
    try:
      header = [h.strip() for h in next(reader)]
    except StopIteration:
      raise ValueError(f'{path} is empty') from None
    yield header
    yield from reader


def _missing(reader: Iterator[list[str]], width: int
             ) -> tuple[np.ndarray, np.ndarray, int]:
  """(good [rows]: the row has the header's width, missing [rows, width]:
  the value is missing or the row is not good, malformed rows) of the rows
  after the header (step 1)."""
  missing, malformed = [], 0
  for row in reader:
    if len(row) != width:
      malformed += 1
      missing.append(None)
      continue
    missing.append(bytes(v.strip().lower() in _CSV_MISSING for v in row))
  good = np.array([m is not None for m in missing], bool)
  mask = np.zeros((len(missing), width), bool)
  if good.any():
    mask[good] = np.frombuffer(b''.join(m for m in missing if m is not None),
                               np.uint8).reshape(-1, width).astype(bool)
  mask[~good] = True
  return good, mask, malformed


def _kept_columns(header: list[str], target: str, named: set[str],
                  good: np.ndarray, mask: np.ndarray,
                  dropped: dict[str, list[str]]) -> list[int]:
  """The indices of the columns kept by step 2; the others go to
  ``dropped`` under their reason."""
  keep_cols = []
  for j, col in enumerate(header):
    if col == target:
      keep_cols.append(j)
    elif col in named:
      dropped.setdefault('identifier, url or text', []).append(col)
    elif good.any() and mask[good, j].mean() > _CSV_MAX_MISSING_FRACTION:
      dropped.setdefault('missing in most rows', []).append(col)
    else:
      keep_cols.append(j)
  return keep_cols


def _parse_columns(columns: list[str], table: list[tuple[str, ...]],
                   target: str, dropped: dict[str, list[str]]):
  """(features, their names, the integer-coded ones, target) of the kept
  rows (step 4); dropped columns go to ``dropped``."""
  features, names, coded = [], [], []
  y = None
  for col, cells in zip(columns, table):
    try:
      numbers = np.array([_csv_number(c) for c in cells], np.float64)
    except ValueError:
      if col == target:
        raise ValueError(f'target column {target!r} is not numeric') from None
      distinct = sorted(set(cells))
      if len(distinct) > _CSV_MAX_DISTINCT_FRACTION * len(cells):
        dropped.setdefault('free text (mostly distinct values)', []).append(
            col)
        continue
      codes = {v: k for k, v in enumerate(distinct)}
      numbers = np.array([codes[c] for c in cells], np.float64)
      coded.append(col)
    if col == target:
      y = numbers
    elif np.ptp(numbers) == 0:
      dropped.setdefault('constant', []).append(col)
      if col in coded:
        coded.remove(col)
    else:
      features.append(numbers)
      names.append(col)
  return features, names, coded, y


def _read_kept(path: str, wanted: set[int],
               keep_cols: list[int]) -> list[list[str]]:
  """The stripped values of the kept columns of the rows in ``wanted``
  (indices after the header), in file order: the second pass."""
  reader = _rows(path)
  next(reader)
  return [[row[j].strip() for j in keep_cols]
          for i, row in enumerate(reader) if i in wanted]


def load_csv(path: str, *, seed: int = 0, target: str = 'int_rate',
             n_samples: int | None = 10_000,
             drop: tuple[str, ...] | list[str] = (),
             test_fraction: float = 0.2, max_train: int | None = None,
             max_test: int | None = None,
             standardize_targets: bool = True) -> Dataset:
  """Regression on a CSV file with a header row (e.g. Lending Club's loan.csv).

  The file is cleaned in the four steps of the module docstring (Farokhi,
  Sec. 4), then split and standardized like the other tabular sets.

  Args:
    path: the CSV file.
    seed: seeds the row subset and the split.
    target: the column to predict (default ``int_rate``).
    n_samples: rows kept after cleaning (None: all).
    drop: more columns to drop.
    test_fraction, max_train, max_test, standardize_targets: as ``load``.

  Returns:
    A regression ``Dataset`` named ``csv:PATH`` (source ``csv``); ``extras``
    lists the feature columns, which of them were integer-coded, the dropped
    columns with reasons, and the row counts.

  Raises:
    ValueError: unreadable file, missing or non-numeric target, no complete
      rows or no feature left, bad options.
  """
  if not 0 < test_fraction < 1:
    raise ValueError(f'Expected test_fraction={test_fraction} in (0, 1).')
  if n_samples is not None and (not isinstance(n_samples, int) or
                                n_samples <= 0):
    raise ValueError(f'Expected n_samples={n_samples} to be an integer > 0.')
  reader = _rows(path)
  header = next(reader)
  if target not in header:
    raise ValueError(f'target column {target!r} is not in {path} (columns: '
                     f'{", ".join(header)})')
  good, mask, malformed = _missing(reader, len(header))
  dropped: dict[str, list[str]] = {}
  keep_cols = _kept_columns(header, target, set(CSV_DROP) | set(drop), good,
                            mask, dropped)
  complete = np.flatnonzero(good & ~mask[:, keep_cols].any(axis=1))
  if not complete.size:
    raise ValueError(f'{path}: no row has every kept column')
  chosen = complete[subset(complete.size, n_samples, 'n_samples',
                           np.random.default_rng(seed))]
  values = _read_kept(path, set(chosen.tolist()), keep_cols)
  features, names, coded, y = _parse_columns(
      [header[j] for j in keep_cols], list(zip(*values)), target, dropped)
  if not features:
    raise ValueError(f'{path}: no feature column is left after cleaning')
  extras = dict(target=target, columns=names, coded=coded, dropped=dropped,
                rows_read=len(good), rows_malformed=malformed,
                rows_complete=int(complete.size), rows_kept=len(chosen))
  return split_and_standardize(CSV_PREFIX + path, np.stack(features, axis=1),
                               y, None, True, 'csv', seed, test_fraction,
                               max_train, max_test, standardize_targets,
                               extras)
