"""Experiment configurations: a mode's settings plus the command line's.

Example:
  >>> cfg = from_mode('demo', 'quick', {'quick': dict(epsilons=[1.0])},
  ...                 dict(delta=1e-5, seed=0), epsilons=[2.0, 1.0, 2.0],
  ...                 seed=None)
  >>> cfg['epsilons'], cfg['delta'], cfg['seed'], cfg['mode']
  ([1.0, 2.0], 1e-05, 0, 'quick')
"""

from typing import Any


def from_mode(name: str, mode: str, modes: dict[str, dict[str, Any]],
              defaults: dict[str, Any], *, epsilons=None, delta=None,
              dataset=None, no_dataset: str | None = None,
              **overrides) -> dict[str, Any]:
  """``defaults``, then ``modes[mode]``, then what the command line gave.

  Args:
    name: the experiment's name, for error messages.
    mode: a key of ``modes``.
    modes: settings per mode.
    defaults: settings every mode shares.
    epsilons: replaces ``epsilons`` (sorted, duplicates dropped) if given.
    delta: replaces ``delta`` if given.
    dataset: replaces ``dataset`` if given; must be None when
      ``no_dataset`` is given.
    no_dataset: why the experiment uses no dataset; then a dataset is
      refused with it.
    **overrides: other settings; None means not given.

  Returns:
    the configuration, with ``mode``; validating it is the caller's.

  Raises:
    ValueError: an unknown mode, or a dataset the experiment cannot use.
  """
  if mode not in modes:
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(modes)}")
  if no_dataset is not None and dataset is not None:
    raise ValueError(f'{name} {no_dataset}; drop --dataset')
  overrides['dataset'] = dataset
  cfg = dict(defaults, **modes[mode], mode=mode)
  if epsilons is not None:
    cfg['epsilons'] = sorted(set(float(e) for e in epsilons))
  if delta is not None:
    cfg['delta'] = float(delta)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  return cfg
