"""compgd's configuration: modes, methods and validation."""

from typing import Any

NAME = 'compgd'
DESCRIPTION = ('compressed private gradient descent with random projections '
               'vs DP-GD on sparse logistic regression (Huang thesis, '
               'Figs. 7.1-7.3)')
MODES = {
    'quick': dict(num_seeds=5, dims=[100, 300, 1000], intrinsic=[1],
                  epochs=[2, 5]),
    'full': dict(num_seeds=10, dims=[30, 100, 300, 1000, 3000],
                 intrinsic=[1, 3, 10], epochs=list(range(1, 11))),
}
DEFAULTS = dict(seed=0, n=3000, n_test=100, epsilon=2.0, delta=0.01,
                compression=10, signal=4.0, l2_norm_clip=1.0,
                lr_scale=3.0, solver_iterations=50, accountant='rdp',
                claim_epochs=None)
METHODS = ('gd', 'compgd', 'dp_gd', 'dp_compgd')
PRIVATE = ('dp_gd', 'dp_compgd')
COMPRESSED = ('compgd', 'dp_compgd')
LABELS = {'gd': 'GD', 'compgd': 'CompGD', 'dp_gd': 'DP-GD',
          'dp_compgd': 'DP-CompGD'}
COLORS = {'gd': 'k', 'compgd': 'C7', 'dp_gd': 'C3', 'dp_compgd': 'C0'}


def _positive_int(name, value, minimum=1):
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
    raise ValueError(f'Expected {name}={value} to be an integer >= {minimum}.')


def config(mode: str, epsilons=None, dataset=None, delta=None, **overrides
           ) -> dict[str, Any]:
  """The exact configuration.

  ``epsilons`` takes one value (the run's total epsilon); ``dataset`` is
  refused (the data are generated, as in the thesis).
  """
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  if dataset is not None:
    raise ValueError(f'{NAME} generates its data (points on the unit sphere,'
                     f' sparse logistic labels); drop --dataset {dataset}')
  if epsilons is not None:
    if len(epsilons) != 1:
      raise ValueError(f'{NAME} runs at one total epsilon; got --epsilons '
                       f'{list(epsilons)}')
    cfg['epsilon'] = float(epsilons[0])
  if delta is not None:
    cfg['delta'] = float(delta)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  if not cfg['epsilon'] > 0:
    raise ValueError(f"Expected epsilon={cfg['epsilon']} > 0.")
  if not 0 < cfg['delta'] < 1:
    raise ValueError(f"Expected delta={cfg['delta']} in (0, 1).")
  for name in ('num_seeds', 'n', 'n_test', 'compression',
               'solver_iterations'):
    _positive_int(name, cfg[name])
  _positive_int('num_seeds', cfg['num_seeds'], 2)
  for name in ('signal', 'l2_norm_clip', 'lr_scale'):
    if not cfg[name] > 0:
      raise ValueError(f'Expected {name}={cfg[name]} > 0.')
  cfg['dims'] = sorted(set(int(d) for d in cfg['dims']))
  cfg['epochs'] = sorted(set(int(e) for e in cfg['epochs']))
  cfg['intrinsic'] = sorted(set(int(k) for k in cfg['intrinsic']))
  for d in cfg['dims']:
    _positive_int('d', d, cfg['compression'])
    for k in cfg['intrinsic']:
      if k > d:
        raise ValueError(f'Expected intrinsic dimension {k} <= d={d}.')
  for e in cfg['epochs'] + cfg['intrinsic']:
    _positive_int('epochs/intrinsic', e)
  if cfg['claim_epochs'] is None:
    cfg['claim_epochs'] = cfg['epochs'][-1]
  if cfg['claim_epochs'] not in cfg['epochs']:
    raise ValueError(f"Expected claim_epochs={cfg['claim_epochs']} in "
                     f"epochs={cfg['epochs']}.")
  return cfg
