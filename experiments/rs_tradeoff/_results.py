"""rs_tradeoff's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  model: str  # the network's name
  num_params: int  # its parameter count d
  steps: int  # training steps of every run
  runs: Rows  # one per (setting, sigma, C, r*, seed), the non-private row too
  summary: Rows  # runs, mean and SEM over seeds, with bits_vs_dense
