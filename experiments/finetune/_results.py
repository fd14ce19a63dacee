"""finetune's numbers (``_run.run``).

A part is one (method, epsilon)'s runs over the seeds: ``val`` and ``test``
accuracy [seeds, learning rates], ``chosen`` (the index picked on
validation) and ``chosen_lr`` per seed, ``selected_test`` (its test
accuracy) and ``dimension`` (of the noised update); a private part adds
``noise_multiplier`` and ``epsilon`` (read from the run).
"""

import dataclasses
from typing import Any

from experiments.common import results

Part = dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  public: dict[str, Any]  # the public pretraining set: name, n
  steps: int  # DP-SGD steps of every fine-tuning run
  sampling_rate: float  # Poisson sampling rate q
  pretrained: dict[str, float]  # accuracy: public_train, val, test
  private: dict[str, dict[str, Part]]  # per method, per target epsilon (str)
  non_private: dict[str, Part]  # per method: noise 0, clip never reached
  bits: dict[str, int]  # bits per noisy update: full, lora
