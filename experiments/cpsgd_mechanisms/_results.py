"""cpsgd_mechanisms' numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  sensitivities: dict[str, list[float]]  # per dimension d: (L1, L2, L_inf)
  gaussian: Rows  # per epsilon: classical and tight sigma, their errors
  rows: Rows  # per (d, j, epsilon): Theorem 1's N, error vs the Gaussian's
  exact: Rows  # d = 1: exact epsilon at that N, exactly calibrated N
  validation: Rows  # sampling check: measured vs formula error per point
  summary: dict[str, Any]  # ranges the report quotes (``_run.summary``)
  exact_checks: Rows  # pass/fail comparisons of the calibrated formulas
