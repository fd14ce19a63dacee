"""trees' claims, paired by seed (experiments.common.claims).

Every method of seed s runs on the split of seed s, so per-(dataset, seed)
accuracy differences are paired; each claim pools them over the datasets run
(mean accuracy gain over the benchmark). One Bonferroni family:

* SPE beats RDT (eps = 2, Table 8.1);
* SPE beats diffprivlib's random forest (eps = 2);
* unlabelled data helps at small eps: SSPE-1 (trees on the unlabelled 80%,
  labels from the labelled 20%, the same feature-and-label privacy) beats
  SPE trained on the labelled 20% alone, at ``small_epsilon``.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.trees._config import Config


def _pooled(table, a, b):
  diffs = [np.asarray(acc[a]) - np.asarray(acc[b]) for acc in table.values()
           if a in acc and b in acc]
  return np.concatenate(diffs) if diffs else None


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  family = claims_lib.ClaimFamily()
  for other, label in (('rdt', 'RDT'), ('dp_rf', 'diffprivlib RF')):
    diff = _pooled(results['per_seed'], 'spe', other)
    if diff is not None:
      family.add(f'SPE has higher test accuracy than {label} at eps='
                 f'{cfg.epsilon:g} (pooled over datasets and seeds)', diff,
                 kind=other)
  diff = _pooled(results['small'], 'sspe1', 'spe_labelled')
  family.add(f'unlabelled data helps at small eps: SSPE-1 beats SPE on the '
             f'labelled {cfg.labelled_fraction:.0%} alone at eps='
             f'{cfg.small_epsilon:g}', diff, kind='unlabelled')
  return family
