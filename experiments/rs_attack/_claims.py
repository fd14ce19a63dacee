"""rs_attack's claims, one family, paired by seed.

Thm 5.1's bound at every r > 0 (per seed, the smallest relative margin
error / bound - 1 over those rates; at r = 0 the bound is attained with
equality, so it is no claim there), then the inversion error rising between
consecutive rates (log of the mean MSE over a seed's images). Sanity, its
own family: at r = 0 the measured error is the bound (a known value; per
seed abs(error / bound - 1) below ``AT_ZERO``).
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.rs_attack._config import Config
from experiments.rs_attack._results import Results

AT_ZERO = 0.05  # relative distance of the r = 0 error from the bound


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
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
             kind='paper', rates=[rates[i] for i in positive])
  for a, b in zip(range(len(rates) - 1), range(1, len(rates))):
    family.add(f'inversion MSE rises from r={rates[a]:g} to r={rates[b]:g} '
               '(log of the mean over images)', noisy[:, b], noisy[:, a],
               kind='paper', rates=[rates[a], rates[b]])
  sanity = claims_lib.ClaimFamily('sanity')
  zero = [i for i, r in enumerate(rates) if r == 0]
  if zero:
    sanity.add(f'at r = 0 the LS attack error is the Thm 5.1 bound: within '
               f'{AT_ZERO:.0%} on every seed (per seed abs(error/bound - 1))',
               np.abs(ratio[:, zero[0]] - 1), threshold=AT_ZERO,
               higher_is_better=False, kind='sanity',
               remedy='more images per seed, so that the measured error at '
               'r = 0 meets the bound it attains')
  return [family, sanity]
