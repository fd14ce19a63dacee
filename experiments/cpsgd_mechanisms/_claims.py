"""cpsgd_mechanisms' claim: the sampling check, the only one measured on
random draws (the exact checks of ``_run.exact_checks`` pass or fail). It is
a sanity claim: the Binomial mechanism's variance is a known value, and the
paper's statements here are the exact checks."""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.cpsgd_mechanisms._config import Config
from experiments.cpsgd_mechanisms._results import Results


def claims(results: Results, cfg: Config) -> claims_lib.ClaimFamily:
  """Per seed the statistic is the largest relative deviation
  abs(measured / formula - 1) over the sampled points ("at every point"),
  claimed below ``match_tolerance`` (the tolerance, fixed in the
  configuration, is the claim's threshold)."""
  family = claims_lib.ClaimFamily()
  validation = results.validation
  if not validation:
    return family
  dev = np.max([np.abs(np.asarray(v['per_seed']) / v['formula'] - 1)
                for v in validation], axis=0)
  tol = cfg.match_tolerance
  family.add(f'sampled Binomial error within {tol:.0%} of s^2 N p(1-p) at all '
             f'{len(validation)} sampled points (per seed: the largest abs('
             'measured / formula - 1))', dev, threshold=tol,
             higher_is_better=False, kind='sanity',
             remedy='more draws per sampled point', per_seed=dev.tolist())
  return family
