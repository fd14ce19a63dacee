"""cpsgd_training's numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  model: str  # the model that trained ('logistic' or 'mlp')
  dimension: int  # d, the model's parameters (each client's vector)
  padded_dimension: int  # d', the rotated messages' length
  clients_per_round: int  # n, the clients each round
  delta_round: float  # each round's delta: delta / (2 rounds)
  privacy: Rows  # per cpSGD configuration: bits, epsilons, its Gaussian
  runs: Rows  # per (setting, seed): final accuracies, loss, gradient norms
  summary: Rows  # runs, mean and SEM over seeds, with each setting's privacy
  curves: Rows  # per setting: mean test accuracy at the evaluated rounds
  comparisons: Rows  # per cpSGD configuration: means beside its Gaussian's
  plan: dict[str, Any]  # the claims, fixed before training (_claims.plan)
  exact_checks: Rows  # deterministic checks of the accounting
