"""correlated_noise's numbers (``_run.run``).

A part is one method's runs over the seeds: ``settings`` (its (C, lr) pairs
or learning rates), ``val`` and ``test`` accuracy [seeds, settings],
``chosen`` (the setting picked per seed on validation), ``selected_test``
(its test accuracy), ``noise_multiplier`` and ``epsilon`` (read from the
run), and what the method adds (BandMF: ``bands``, ``partition_rate``;
adaptive clipping: ``final_clip``, ``chosen_final_clip``; the user-level
part: ``steps``, ``rate``, ``unit``, ``num_users``).
"""

import dataclasses
from typing import Any

from experiments.common import results

Part = dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  steps: int  # steps of the fixed, BandMF and adaptive runs
  sampling_rate: float  # their Poisson sampling rate q
  fixed: Part  # DP-SGD over the (C, lr) grid
  adaptive: Part  # adaptive clipping over the learning rates
  bandmf: Part  # BandMF over the (C, lr) grid
  user_level: Part  # user-level DP-SGD over the learning rates
  example_level: Part  # its example-level baseline on the same data
