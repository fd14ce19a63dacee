"""correlated_noise's numbers (``_run.run``)."""

import dataclasses
from typing import Any

from experiments.common import results


@dataclasses.dataclass(frozen=True, kw_only=True)
class Part(results.Record):
  """One method's runs over the seeds and its settings, the setting chosen
  per seed on validation."""
  settings: list[Any]  # its (C, lr) pairs or learning rates
  val: list[list[float]]  # validation accuracy [seeds, settings]
  test: list[list[float]]  # test accuracy [seeds, settings]
  chosen: list[Any]  # per seed: the setting with the best validation
  selected_test: list[float]  # per seed: the chosen setting's test accuracy
  noise_multiplier: float | None  # sigma read from the run
  epsilon: float  # epsilon of the event read from the run


@dataclasses.dataclass(frozen=True, kw_only=True)
class BandMf(Part):
  bands: int  # bands (= cyclic Poisson partitions)
  partition_rate: float  # sampling rate within a partition


@dataclasses.dataclass(frozen=True, kw_only=True)
class Adaptive(Part):
  final_clip: list[list[float]]  # the bound after training [seeds, lrs]
  chosen_final_clip: list[float]  # per seed: that of the chosen lr


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unit(Part):
  steps: int  # steps of the user-level pair
  rate: float  # sampling rate of a user (or an example)
  unit: str  # 'user' or 'example'


@dataclasses.dataclass(frozen=True, kw_only=True)
class UserLevel(Unit):
  num_users: int  # users in the train split


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  steps: int  # steps of the fixed, BandMF and adaptive runs
  sampling_rate: float  # their Poisson sampling rate q
  fixed: Part  # DP-SGD over the (C, lr) grid
  adaptive: Adaptive  # adaptive clipping over the learning rates
  bandmf: BandMf  # BandMF over the (C, lr) grid
  user_level: UserLevel  # user-level DP-SGD over the learning rates
  example_level: Unit  # its example-level baseline on the same data
