"""Results files, markdown tables and headless plots.

A run of experiment NAME writes ``OUT/NAME/results.json``; the report step
renders ``OUT/NAME/report.md`` and its PNG plots from that file alone (so
``python -m experiments report OUT`` can redo them), then ``OUT/REPORT.md``
gathers every experiment's report.
"""

import json
import math
import os
from typing import Any, Sequence

import numpy as np

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS_FILE = 'results.json'
REPORT_FILE = 'report.md'  # one experiment's section
COMBINED_REPORT_FILE = 'REPORT.md'  # all experiments of a results directory


def fmt(value: Any, digits: int = 4) -> str:
  """A table cell: '-' for None, floats to ``digits`` significant places."""
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return '-'
  if isinstance(value, float):
    return f'{value:.{digits}g}'
  return str(value)


def markdown_table(rows: Sequence[dict[str, Any]],
                   columns: Sequence[tuple[str, str]]) -> str:
  """``columns`` are (key, header) pairs; missing keys render as '-'."""
  lines = ['| ' + ' | '.join(h for _, h in columns) + ' |',
           '|' + '---|' * len(columns)]
  lines += ['| ' + ' | '.join(fmt(r.get(k)) for k, _ in columns) + ' |'
            for r in rows]
  return '\n'.join(lines)


def write_results(out_dir: str, results: dict[str, Any]) -> str:
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, RESULTS_FILE)
  with open(path, 'w') as f:
    json.dump(results, f, indent=2, sort_keys=True)
  return path


def read_results(out_dir: str) -> dict[str, Any]:
  with open(os.path.join(out_dir, RESULTS_FILE)) as f:
    return json.load(f)


def save_figure(fig, out_dir: str, name: str) -> str:
  """Writes ``fig`` as ``out_dir/name`` (PNG) and closes it; returns ``name``."""
  fig.tight_layout()
  fig.savefig(os.path.join(out_dir, name), dpi=120)
  plt.close(fig)
  return name


def dataset_info(ds) -> dict[str, Any]:
  """What a results file records about the data that actually ran."""
  return dict(requested=ds.requested, name=ds.name, source=ds.source,
              note=ds.note, n_train=len(ds.x_train), n_test=len(ds.x_test))


def dataset_line(dataset: dict[str, Any]) -> str:
  """Which data ran, and the fallback note when it is not what was asked."""
  line = (f"Dataset: **{dataset['name']}** ({dataset['source']}; "
          f"{dataset['n_train']} train / {dataset['n_test']} test)")
  if dataset['name'] != dataset['requested']:
    line += f"; requested {dataset['requested']}: {dataset['note']}"
  return line + '.'


CARRIED = ('noise_multiplier', 'epsilon_rdp', 'epsilon_pld', 'delta',
           'dataset')


def summarize_over_seeds(runs: Sequence[dict[str, Any]], keys: Sequence[str],
                         metrics: Sequence[str]) -> list[dict[str, Any]]:
  """One row per distinct ``keys``: mean, std and SEM of each metric over seeds.

  Rows keep the privacy context of their runs (``CARRIED`` fields, taken from
  the first run of the group; runs of a group share them) and ``seeds``.
  """
  groups: dict[tuple, list] = {}
  for r in runs:
    groups.setdefault(tuple(r[k] for k in keys), []).append(r)
  rows = []
  for values, group in groups.items():
    row = dict(zip(keys, values))
    row.update({k: group[0].get(k) for k in CARRIED})
    for m in metrics:
      arr = np.asarray([g[m] for g in group], np.float64)
      std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
      row.update({f'{m}_mean': float(arr.mean()), f'{m}_std': std,
                  f'{m}_sem': std / math.sqrt(arr.size)})
    row['seeds'] = len(group)
    rows.append(row)
  return rows
