"""rs_attack's numbers (``_run.run``): the two attacks, each a dict of
per-seed arrays (as lists) with its rates."""

import dataclasses
from typing import TypedDict

from experiments.common import results


class ClosedForm(TypedDict):
  """(a) The least-squares attack on a one-input linear layer."""
  trials: int  # draws of mask and noise per rate and seed
  zeros: list[int]  # coordinates the mask zeroes, per rate
  rates: list[float]  # sparsification rates r
  mse: list[list[float]]  # [seed, rate]: mean squared error over the trials
  sem: list[list[float]]  # [seed, rate]: its Monte Carlo SEM
  bound: list[list[float]]  # [seed, rate]: the Thm 5.1 bound


class Inversion(TypedDict):
  """(b) Inverting gradients of a sigmoid MLP; setting 0 is the noiseless
  dense reference, then one noisy setting per rate."""
  settings: list[str]  # 'no noise', then 'noisy' per rate
  rates: list[float]  # the rate of each setting
  noise_std: list[float]  # the gradient noise stddev of each setting
  params: int  # the MLP's parameter count
  images: list[list[int]]  # [seed, image]: the test images attacked
  mse: list[list[list[float]]]  # [seed, image, setting]: reconstruction MSE


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  closed_form: ClosedForm  # (a), per seed and rate
  inversion: Inversion  # (b), per seed, image and setting
