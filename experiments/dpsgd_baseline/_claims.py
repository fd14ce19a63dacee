"""dpsgd_baseline's claims, per model, paired by seed, one family.

Every private accuracy is the seed's test accuracy at the C it chose on the
validation split (``_run.select_clip``).

More privacy budget buys accuracy (eps = max beats eps = min), and at the
largest epsilon DP-SGD stays within ``within`` of non-private training
(Abadi et al. report about 1.3 points on MNIST at eps = 8).
"""

from experiments.common import claims as claims_lib
from experiments.dpsgd_baseline._config import Config
from experiments.dpsgd_baseline._results import Results


def _accuracy(runs, model, target):
  """Test accuracy per seed (sorted by seed) of one setting."""
  rows = sorted((r for r in runs if r['model'] == model and
                 r['target_epsilon'] == target), key=lambda r: r['seed'])
  return [r['test_accuracy'] for r in rows]


def claims(results: Results, cfg: Config) -> claims_lib.ClaimFamily:
  runs = results.selected
  low, high = min(cfg.epsilons), max(cfg.epsilons)
  family = claims_lib.ClaimFamily()
  for model in dict.fromkeys(r['model'] for r in runs):
    if low < high:
      family.add(f'{model}: eps={high:g} beats eps={low:g} (test acc)',
                 _accuracy(runs, model, high), _accuracy(runs, model, low),
                 kind='paper')
    family.add(f'{model}: eps={high:g} within {cfg.within:g} of non-private '
               '(test acc)', _accuracy(runs, model, high),
               _accuracy(runs, model, None), threshold=-cfg.within,
               kind='paper')
  return family
