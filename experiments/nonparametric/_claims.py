"""nonparametric's claims, paired by seed (experiments.common.claims).

Every method of seed s runs on the split of seed s, so per-seed accuracy
differences are paired. One Bonferroni family over every dataset's claims:
NoisyReg beats DP-kNN, NoisyReg beats RDT (the thesis's Table 5.3 reading),
and RDT beats diffprivlib's random forest when diffprivlib ran.
"""

from typing import Any

import numpy as np

from experiments.common import claims as claims_lib
from experiments.nonparametric._config import Config


def claims(results: dict[str, Any], cfg: Config) -> claims_lib.ClaimFamily:
  del cfg
  family = claims_lib.ClaimFamily()
  for name, per in results['table'].items():
    for a, b in (('noisy_reg', 'dp_knn'), ('noisy_reg', 'rdt'),
                 ('rdt', 'dpl_rf')):
      if a in per and b in per:
        family.add(f'{a} has higher test accuracy than {b} on {name}',
                   np.asarray(per[a]) - np.asarray(per[b]), dataset=name,
                   treatment=a, control=b)
  return family
