"""rs_attack's claims, one family, paired by seed.

Thm 5.1's bound at every r > 0 (per seed, the smallest relative margin
error / bound - 1 over those rates; at r = 0 the bound is attained with
equality, so it is no claim there), then the inversion error rising between
consecutive rates (log of the mean MSE over a seed's images).
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.rs_attack._config import Config
from experiments.rs_attack._results import Results


def claims(results: Results, cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  cf, inv = results.closed_form, results.inversion
  rates = cf['rates']
  ratio = np.asarray(cf['mse']) / np.asarray(cf['bound'])
  positive = [i for i, r in enumerate(rates) if r > 0]
  # per seed: the smallest relative margin over the rates r > 0
  margin = (ratio[:, positive] - 1).min(axis=1)
  noisy = np.log(np.asarray(inv['mse'])[:, :, 1:].mean(axis=1))  # [S, R]
  family = claims_lib.ClaimFamily()
  family.add('LS attack error above the Thm 5.1 bound at every r > 0 '
             '(per-seed min over r of error/bound - 1)', margin,
             rates=[rates[i] for i in positive])
  for a, b in zip(range(len(rates) - 1), range(1, len(rates))):
    family.add(f'inversion MSE rises from r={rates[a]:g} to r={rates[b]:g} '
               '(log of the mean over images)', noisy[:, b], noisy[:, a],
               rates=[rates[a], rates[b]])
  return family
