"""trees' claims, paired by seed (experiments.common.claims).

Every method of seed s runs on the splits of seed s, so per-(dataset, seed)
accuracy differences are paired. One Bonferroni family:

* SPE beats RDT, per dataset (eps = 2, Table 8.1);
* SPE beats diffprivlib's random forest, per dataset (eps = 2);
* unlabelled data helps at small eps: SSPE-1 (trees on the unlabelled 80%,
  labels from the labelled 20%, the same feature-and-label privacy) beats
  SPE trained on the labelled 20% alone, at ``small_epsilon``;
* SSPE-2 as written (labels private only) beats SSPE-1 (Table 8.2's Syn
  rows: +4.8, +4.2, +9.5 points);
* Fig. 8.2: at each depth, geometric split budgets put the private medians
  closer to the true medians than uniform budgets (per seed, the mean over
  the epsilons run of the distance difference).

SPE against diffprivlib's forest is the project's own baseline (kind
extension); the rest are the thesis's (paper), SSPE-2 against SSPE-1 with
Table 8.2's smallest Syn gain as its expected effect. Sanity, its own
family: per dataset, SPE without noise beats RDT, or no private SPE could.
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.trees._config import Config
from experiments.trees._results import Results

TABLE82 = 0.042  # Table 8.2, Syn rows: SSPE-2 over SSPE-1 by 4.2 to 9.5 points


def _in_order(table, cfg: Config):
  """(dataset, accuracies) of ``table`` in the order of ``cfg.datasets``
  (not the order results.json keeps its keys in)."""
  return [(name, table[name]) for name in dict.fromkeys(cfg.datasets)
          if name in table]


def _pooled(table, cfg: Config, a, b):
  diffs = [np.asarray(acc[a]) - np.asarray(acc[b])
           for _, acc in _in_order(table, cfg) if a in acc and b in acc]
  return np.concatenate(diffs) if diffs else None


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  family = claims_lib.ClaimFamily()
  sanity = claims_lib.ClaimFamily('sanity')
  for name, acc in _in_order(results.per_seed, cfg):
    for other, label in (('rdt', 'RDT'), ('dp_rf', 'diffprivlib RF')):
      if 'spe' in acc and other in acc:
        family.add(f'SPE has higher test accuracy than {label} on {name} at '
                   f'eps={cfg.epsilon:g}', np.asarray(acc['spe']) -
                   np.asarray(acc[other]),
                   kind='paper' if other == 'rdt' else 'extension',
                   comparison=other, dataset=name)
    if 'spe_ceiling' in acc and 'rdt' in acc:
      sanity.add(f'SPE without noise has higher test accuracy than RDT at '
                 f'eps={cfg.epsilon:g} on {name}',
                 np.asarray(acc['spe_ceiling']) - np.asarray(acc['rdt']),
                 kind='sanity', remedy='deeper trees or more training '
                 'points, until the noise-free SPE beats RDT',
                 comparison='ceiling', dataset=name)
  diff = _pooled(results.small, cfg, 'sspe1', 'spe_labelled')
  if diff is not None:
    family.add(f'unlabelled data helps at small eps: SSPE-1 beats SPE on the '
               f'labelled {cfg.labelled_fraction:.0%} alone at eps='
               f'{cfg.small_epsilon:g}', diff, kind='paper',
               comparison='unlabelled')
  diff = _pooled(results.per_seed, cfg, 'sspe2', 'sspe1')
  if diff is not None:
    family.add(f'SSPE-2 (as written) has higher test accuracy than SSPE-1 at '
               f'eps={cfg.epsilon:g} (pooled over the Table 8.2 datasets)',
               diff, kind='paper', effect=TABLE82, comparison='sspe2')
  epsilons = dict.fromkeys(str(e) for e in cfg.median_epsilons)  # run order
  for depth in cfg.median_depths:
    if not results.median:
      break
    diff = [np.mean([by_eps[e]['geometric'] - by_eps[e]['uniform']
                     for e in epsilons]) for by_eps in
            (seed[str(depth)] for seed in results.median)]
    family.add(f'Fig. 8.2: geometric split budgets estimate the median more '
               f'closely than uniform ones at depth {depth} (mean distance '
               f'over eps in {list(cfg.median_epsilons)})', diff,
               higher_is_better=False, kind='paper', comparison='allocation',
               depth=depth)
  return [family, sanity]
