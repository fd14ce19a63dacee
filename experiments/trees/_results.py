"""trees' numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results
from experiments.common.results import Rows

# method -> test accuracy per seed (each the mean over the seed's splits)
PerSeed = dict[str, list[float]]
# Fig. 8.2, one seed: str(depth) -> str(eps) -> allocation -> distance
MedianDistances = dict[str, dict[str, dict[str, float]]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  info: dict[str, dict[str, Any]]  # dataset -> sizes, depth, splits
  per_seed: dict[str, PerSeed]  # Tables 8.1-8.2 at epsilon, per dataset
  small: dict[str, PerSeed]  # Table 8.2 at small_epsilon, per dataset
  mann_whitney: dict[str, dict[str, float]]  # dataset -> rival -> p (SPE)
  grid: Rows  # Fig. 8.6: SPE per (dataset, seed, depth, trees)
  median: list[MedianDistances]  # Fig. 8.2, one per seed (none: not run)
  diffprivlib_error: str | None  # why diffprivlib did not run (None: ran)
  methods: dict[str, list[str]]  # the supervised and semi-supervised ones
