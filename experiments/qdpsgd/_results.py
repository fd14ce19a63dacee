"""qdpsgd's numbers (``_run.run``).

A scenario is one (agents n, expected batch size B): its graph and shards
(``agents``, ``batch``, ``m``, ``records``, ``dimension``, ``spectral_gap``,
``edges``, ``deadline``, ``max_batch``, ``eval_rounds``, ``seeds``), and
its runs: ``rows`` (one per setting and seed), ``curves`` (per setting, one
per seed: loss, test accuracy and simulated time at each evaluation) and
``privacy`` (one per setting: the sigma that ran and what it spends).
"""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  scenarios: list[dict[str, Any]]  # per (n, B); the first carries the claims
  plan: Rows  # every claim: family, kind, rows compared (``_claims.plan``)
  chance: float  # test accuracy of a uniform guess, 1 / classes
