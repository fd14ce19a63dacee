"""nonparametric's numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results

# method -> test accuracy per seed (each the mean over the seed's splits)
PerSeed = dict[str, list[float]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  table: dict[str, PerSeed]  # Table 5.3: dataset -> method -> per seed
  datasets: dict[str, dict[str, Any]]  # dataset -> sizes, splits, bins
  sweep: dict[str, dict[str, PerSeed]]  # Fig. 5.1: dataset -> str(eps) -> ...
  diffprivlib: str  # 'diffprivlib available', or why it did not run
