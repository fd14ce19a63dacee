"""rs_privacy's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  model: str  # the network's name
  steps: int  # training steps of every run
  n_train: int  # training examples
  n_validation: int  # validation examples (r* and C are chosen on them)
  sampling_rate: float  # Poisson sampling rate q
  runs: Rows  # one per (target epsilon, C, r*, seed); r* = 0 is DP-SGD
  selected: Rows  # per (target epsilon, method, seed): the choice made
  summary: Rows  # selected, mean and SEM over seeds
  grid: Rows  # runs, mean and SEM over seeds
