"""nonparametric's claims, paired by seed (experiments.common.claims).

Every method of seed s runs on the splits of seed s, so per-seed accuracy
differences are paired. Two Bonferroni families: the thesis's Table 5.3
reading (NoisyReg beats DP-kNN and NoisyReg beats RDT, on every dataset),
and the project's own baseline check (RDT beats diffprivlib's random forest,
when diffprivlib ran), which the thesis does not make.

Both are extensions: NoisyReg is label-DP (features public), DP-kNN and RDT
protect features and labels, so the thesis's comparison is not at equal
privacy and the claims say so. Sanity, a third family: on every dataset the
non-private kNN beats DP-kNN (the setup can show what privacy costs).
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.nonparametric._config import Config
from experiments.nonparametric._results import Results


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  """The two families, datasets in the order of ``cfg.datasets`` (not the
  order results.json keeps its keys in)."""
  thesis = claims_lib.ClaimFamily('thesis')
  baseline = claims_lib.ClaimFamily('baselines')
  sanity = claims_lib.ClaimFamily('sanity')
  unit = {'noisy_reg': ' (label-DP)', 'dp_knn': ' (feature-and-label DP)',
          'rdt': ' (feature-and-label DP)', 'dpl_rf': ' (feature-and-label DP)',
          'knn': ' (non-private)'}
  for name in dict.fromkeys(cfg.datasets):
    per = results.table[name]
    for family, a, b in ((thesis, 'noisy_reg', 'dp_knn'),
                         (thesis, 'noisy_reg', 'rdt'),
                         (baseline, 'rdt', 'dpl_rf'),
                         (sanity, 'knn', 'dp_knn')):
      if a in per and b in per:
        kind = dict(kind='sanity', remedy='more training points or a '
                    'smaller epsilon, until privacy costs DP-kNN accuracy'
                    ) if family is sanity else dict(kind='extension')
        family.add(f'{a}{unit[a]} has higher test accuracy than {b}{unit[b]} '
                   f'on {name}', np.asarray(per[a]) - np.asarray(per[b]),
                   dataset=name, treatment=a, control=b, **kind)
  return [f for f in (thesis, baseline, sanity) if len(f)]
