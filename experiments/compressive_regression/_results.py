"""compressive_regression's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  n: int  # examples in D (the whole loaded set)
  n_theta: int  # parameters, the intercept included
  f_star: float  # f(theta*), the least-squares training loss
  rel_loss_at_zero: float  # relative loss of theta_1 = 0 (no training)
  theta_star_norm: float  # ||theta*||_2
  clipped_fraction_at_theta_star: float  # per-example coordinates clipped
  clipped_fraction_at_zero: float  # the same at theta = 0
  final: Rows  # per (method, eps): final relative loss, per seed
  curves: Rows  # per (method, plotted eps): mean and SEM per iteration
  privacy: Rows  # per eps: total epsilon of the releases (basic, PLD)
  realized: Rows  # per eps: compressive_paper's realized epsilon
  kappa_sweep: Rows  # per (method, kappa, plotted eps): final losses
  kappa_validation: Rows  # certified compressive on the validation keys
  validation_seeds: list[int]  # the seeds of the validation runs
