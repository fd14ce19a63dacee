"""qdpsgd's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScenarioRuns(results.Record):
  """One (agents n, expected batch size B): its graph, shards and runs."""
  agents: int  # agents n
  batch: float  # expected batch size B
  m: int  # training records per agent
  records: int  # training records shared out
  dimension: int  # parameters p of the model
  spectral_gap: float  # 1 - beta of the mixing matrix
  edges: int  # edges of the graph
  deadline: float  # T_d of the deadline batches
  max_batch: int  # the deadline sampler's cap
  eval_rounds: list[int]  # the rounds after which loss and accuracy are read
  rows: Rows  # one per (setting, seed)
  curves: dict[str, Rows]  # per setting, per seed: loss, accuracy, time
  privacy: Rows  # one per setting: the sigma that ran, what it spends
  seeds: list[int]  # the seeds that ran


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  scenarios: list[ScenarioRuns]  # per (n, B); the first carries the claims
  plan: Rows  # every claim: family, kind, rows compared (``_claims.plan``)
  chance: float  # test accuracy of a uniform guess, 1 / classes
