"""correlated_noise's claims: three families, paired by seed.

BandMF (Choquette-Choo et al. 2023, amplified banded matrix factorization:
better than DP-SGD at the same epsilon once the run has several epochs):
both tuned on the same (C, lr) grid on the validation split.
Adaptive clipping (Andrew et al. 2021, Sec. 5: adaptive clipping "performs
nearly as well as" the best fixed clip, without tuning it): within
``non_inferiority`` of the fixed clip chosen per seed on the validation
split, and better than the fixed clip it starts from; every method's learning
rate (and the fixed clip) is chosen per seed on the validation split. User-level DP:
user-level DP-SGD still learns at the same epsilon, and the stronger unit
costs accuracy against example-level DP-SGD on the same data.
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.correlated_noise._config import Config
from experiments.correlated_noise._results import Results


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  fixed, adaptive = results.fixed, results.adaptive
  best = fixed.selected_test
  # The fixed clip adaptive clipping starts from, its lr chosen on validation.
  first = [i for i, (c, _) in enumerate(fixed.settings)
           if c == min(cfg.l2_norm_clips)]
  val = np.asarray(fixed.val)[:, first]
  test = np.asarray(fixed.test)[:, first]
  start = test[np.arange(len(test)), np.argmax(val, axis=1)].tolist()
  clipping = claims_lib.ClaimFamily('adaptive clipping')
  clipping.add(f'adaptive clipping within {cfg.non_inferiority:g} of the '
               'best fixed clip chosen on validation (test acc)',
               adaptive.selected_test, best, threshold=-cfg.non_inferiority,
               kind='paper')
  clipping.add(f'adaptive clipping beats the fixed clip it starts from '
               f'(C = {min(cfg.l2_norm_clips):g}; test acc)',
               adaptive.selected_test, start, kind='paper')
  correlated = claims_lib.ClaimFamily('correlated noise')
  correlated.add(f'BandMF ({results.bandmf.bands} bands, cyclic Poisson)'
                 ' beats DP-SGD at the same epsilon, each tuned on the same '
                 '(C, lr) grid on validation (test acc)',
                 results.bandmf.selected_test, best, kind='paper')
  user = results.user_level
  units = claims_lib.ClaimFamily('user level')
  units.add(f'user-level DP-SGD learns (test acc above '
            f'{cfg.user_sanity_accuracy:g})',
            [a - cfg.user_sanity_accuracy for a in user.selected_test],
            kind='sanity', remedy='more rounds or users, until user-level '
            'DP-SGD learns')
  units.add(f'user-level DP costs accuracy against example-level DP at the '
            f'same epsilon ({cfg.num_examples_per_user} examples per user)',
            results.example_level.selected_test, user.selected_test,
            kind='extension')
  return [correlated, clipping, units]
