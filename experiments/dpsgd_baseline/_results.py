"""dpsgd_baseline's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  sampling_rate: float  # Poisson sampling rate q
  max_batch_size: int  # the sampler's cap
  runs: Rows  # one per (model, target epsilon, C, seed)
  selected: Rows  # per (model, target epsilon, seed): the C chosen
  summary: Rows  # runs, mean and SEM over seeds
  selected_summary: Rows  # selected, mean and SEM over seeds
