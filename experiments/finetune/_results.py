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
class Public(results.Record):
  name: str  # the public set and how its images were made MNIST-like
  n: int  # its images


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pretrained(results.Record):
  """The pretrained model's accuracy, before any fine-tuning."""
  public_train: float  # on the public set it was trained on
  val: float  # on MNIST-5k's validation split
  test: float  # on MNIST-5k's test split


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  public: Public  # the public pretraining set
  steps: int  # DP-SGD steps of every fine-tuning run
  sampling_rate: float  # Poisson sampling rate q
  pretrained: Pretrained  # the pretrained model's accuracy
  private: dict[str, dict[str, Part]]  # per method, per target epsilon (str)
  non_private: dict[str, Part]  # per method: noise 0, clip never reached
  bits: dict[str, int]  # bits per noisy update: full, lora
