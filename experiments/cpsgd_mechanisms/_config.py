"""cpsgd_mechanisms' settings (field defaults are the quick preset)."""

import dataclasses

from dpjax import accounting
from experiments.common import config

NAME = 'cpsgd_mechanisms'
DESCRIPTION = ('error vs epsilon of the Gaussian and Binomial mechanisms at '
               'several scales (cpSGD Fig. 1)')
# The sampled epsilons per preset, where the sweep holds them (else the
# sweep's middle epsilon).
VALIDATE = {'quick': (1.0,), 'full': (0.5, 1.0, 4.0)}
setting = config.setting


@dataclasses.dataclass(frozen=True)
class Config(config.Config):
  """Quick: 5 epsilons, sampled at eps = 1 with 4000 coordinates, 3 seeds;
  full: 12 epsilons, sampled at 0.5, 1 and 4 with 20000, 10 seeds. There is
  no dataset: the query is abstract (only its sensitivities matter)."""
  NAME = NAME
  PRESETS = {'quick': {}, 'full': dict(
      epsilons=(0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0),
      num_samples=20000, num_seeds=10)}

  num_seeds: int = setting(3, 'seeds of the sampling check, vmapped', ge=1)
  epsilons: tuple[float, ...] = setting((0.25, 0.5, 1.0, 2.0, 4.0),
                                        'target epsilons', gt=0)
  validate_epsilons: tuple[float, ...] | None = setting(
      None, 'epsilons of the sampling check, among epsilons (none: the '
      "preset's that are swept, else the middle one)")
  num_samples: int = setting(4000, 'coordinates sampled per seed and point',
                             ge=2)
  delta: float = setting(1e-5, 'target delta (both mechanisms)', gt=0, lt=1)
  p: float = setting(0.5, 'Binomial success probability', gt=0, lt=1)
  scale_denominators: tuple[int, ...] = setting(
      (1, 4, 16, 64), 'lattice scales s = 1/j: the j', ge=1)
  dimensions: tuple[int, ...] = setting((1, 100), 'query dimensions d',
                                        ge=1)
  accountant: str = setting('pld', 'accountant of the tight Gaussian',
                            choices=accounting.ACCOUNTANTS)
  # The sampling claim is "the measured error is within this relative
  # distance of s^2 N p(1-p) at every sampled point", fixed before any run.
  # At 4000 coordinates per seed and point the sampling error of one point
  # is about sqrt(2 / 4000) = 2.2%, so a correct sampler leaves the largest
  # of 8 deviations near 4%; a sampler off by 10% in variance fails.
  match_tolerance: float = setting(
      0.1, 'largest relative deviation the sampling claim allows', gt=0, lt=1)

  def normalize(self):
    epsilons = tuple(sorted(set(self.epsilons)))
    validate = self.validate_epsilons
    if validate is None:
      validate = tuple(e for e in VALIDATE[self.mode] if e in epsilons) or (
          epsilons[len(epsilons) // 2],)
    return dict(epsilons=epsilons, validate_epsilons=validate)

  def validate(self):
    for e in self.validate_epsilons:
      if e not in self.epsilons:
        raise ValueError(f'Expected validate_epsilons entry {e} to be one of '
                         f'epsilons={list(self.epsilons)}.')
