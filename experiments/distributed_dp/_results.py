"""distributed_dp's numbers (``_run.run``; ``training``: ``_training``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Training(results.Results):
  """The federated training part (``dataset``: the data it trained on)."""
  seeds: list[int]  # the training seeds, from seed
  dimension: int  # d, the model's parameters
  padded_dimension: int  # d', the rotated messages' length
  clients_per_round: int  # n, the clients each round
  num_clients: int  # clients, one shard each
  delta_round: float  # cpSGD's per-round delta: delta / (2 T)
  cpsgd_epsilon_round: float  # cpSGD's per-round epsilon meeting the total
  cpsgd_candidates: Rows  # per k: the smallest m, its sum bits, MSE bound
  rows: Rows  # per setting: privacy, bits, test accuracy, flagged rounds
  plan: Rows  # the training claims, planned before any training
  wall_seconds: float  # the training's wall time


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  rows: Rows  # per (target epsilon, bits, mechanism): MSE, calibration
  gaussian: Rows  # per target epsilon: the central Gaussian's MSE
  training: Training | None  # the federated training (None: not run)
