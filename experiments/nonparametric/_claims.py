"""nonparametric's claims, paired by seed (experiments.common.verdict).

Every method of seed s runs on the split of seed s, so per-seed accuracy
differences are paired. Per dataset, one Bonferroni family over all claims:
NoisyReg beats DP-kNN, NoisyReg beats RDT (the thesis's Table 5.3 reading),
and RDT beats diffprivlib's random forest when diffprivlib ran.
"""

import numpy as np

from experiments.common import verdict as verdict_lib


def claims(table):
  pending = []
  for name, per in table.items():
    for a, b in (('noisy_reg', 'dp_knn'), ('noisy_reg', 'rdt'),
                 ('rdt', 'dpl_rf')):
      if a in per and b in per:
        pending.append((f'{a} has higher test accuracy than {b} on {name}',
                        np.asarray(per[a]) - np.asarray(per[b]),
                        dict(dataset=name, treatment=a, control=b)))
  m = max(len(pending), 1)
  return [verdict_lib.claim(text, verdict_lib.paired_verdict(
      diff, threshold=0.0, comparisons=m), **details)
          for text, diff, details in pending]
