"""nonparametric's claims, paired by seed (experiments.common.claims).

Every method of seed s runs on the splits of seed s, so per-seed accuracy
differences are paired. Two Bonferroni families: the thesis's Table 5.3
reading (NoisyReg beats DP-kNN and NoisyReg beats RDT, on every dataset),
and the project's own baseline check (RDT beats diffprivlib's random forest,
when diffprivlib ran), which the thesis does not make.
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
  for name in dict.fromkeys(cfg.datasets):
    per = results.table[name]
    for family, a, b in ((thesis, 'noisy_reg', 'dp_knn'),
                         (thesis, 'noisy_reg', 'rdt'),
                         (baseline, 'rdt', 'dpl_rf')):
      if a in per and b in per:
        family.add(f'{a} has higher test accuracy than {b} on {name}',
                   np.asarray(per[a]) - np.asarray(per[b]), dataset=name,
                   treatment=a, control=b)
  return [f for f in (thesis, baseline) if len(f)]
