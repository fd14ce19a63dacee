"""cpsgd_dme's numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  rotated_x_max: float  # rotated_linf_clip(D, d, n, delta)
  rows: Rows  # per cpSGD point (variant, k, m) and input
  gaussian: Rows  # the Gaussian baseline per target epsilon and input
  summary: dict[str, Rows]  # tables rotation_gains and selection
  exact_checks: Rows  # pass/fail checks with no protocol noise in them
  corollary3: dict[str, Any] | None  # ``_run.corollary3``; None: not run
