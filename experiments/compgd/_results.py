"""compgd's numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  privacy: Rows  # per T: sigma, stddev per coordinate, eps (RDP and PLD)
  selection_privacy: dict[str, Any]  # every T's run composed (choosing T)
  rows: Rows  # per (method, d, k, T): errors per seed, mean and SEM
  tuned: Rows  # per (method, d, k): T chosen per seed, its test error
  baselines: Rows  # per (d, k): test error of w = 0 and of w* (Bayes)
