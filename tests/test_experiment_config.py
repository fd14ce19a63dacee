"""experiments/common/config.py: typed settings and the flags derived from them."""

import doctest

import pytest

from experiments.common import config


def test_examples():
  assert doctest.testmod(config).failed == 0


def test_explicit_validation_points_survive_an_epsilon_override():
  from experiments import cpsgd_mechanisms  # pylint: disable=g-import-not-at-top
  cfg = cpsgd_mechanisms.Config.preset('quick', epsilons=[3.0, 5.0],
                                      validate_epsilons=[3.0])
  assert cfg.validate_epsilons == (3.0,)


# --- typed configs (config.Config) and the flags derived from them ---------

import dataclasses  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments.common import flags  # pylint: disable=g-import-not-at-top,wrong-import-position


@dataclasses.dataclass(frozen=True)
class Demo(config.Config):
  NAME = 'demo'
  PRESETS = {'quick': {}, 'full': dict(num_seeds=5, widths=(8, 16))}
  rate: float = config.setting(0.5, 'a rate', gt=0, lt=1)
  epochs: int = config.setting(2, 'epochs', ge=1)
  widths: tuple[int, ...] = config.setting((4,), 'widths', ge=1)
  kind: str = config.setting('a', 'a kind', choices=('a', 'b'))
  fancy: bool = config.setting(False, 'a switch')
  cap: int | None = config.setting(None, 'a cap', ge=1)
  options: dict | None = config.setting(None, 'free options', flag=False)

  def normalize(self):
    return dict(widths=tuple(sorted(self.widths)))

  def validate(self):
    if self.cap is not None and self.cap < self.epochs:
      raise ValueError(f'Expected cap={self.cap} >= epochs={self.epochs}.')


def test_presets_coerce_and_normalize():
  cfg = Demo.preset('full', rate=1 / 4, widths=[16, 2])
  assert (cfg.mode, cfg.num_seeds, cfg.widths, cfg.seeds) == (
      'full', 5, (2, 16), [0, 1, 2, 3, 4])
  assert Demo.preset('quick').to_dict()['widths'] == (4,)
  assert isinstance(Demo(rate=1 - 1 / 2).rate, float)
  assert isinstance(Demo.preset('quick', rate=0.25).replace(epochs=3), Demo)
  with pytest.raises(dataclasses.FrozenInstanceError):
    cfg.epochs = 3  # pytype: disable=not-writable
  with pytest.raises(ValueError, match="unknown mode 'medium'"):
    Demo.preset('medium')
  with pytest.raises(ValueError, match="mode='medium'"):
    Demo(mode='medium')


@pytest.mark.parametrize('overrides, match', [
    (dict(epochz=3), r'demo: unknown setting epochz \(known: cap, epochs'),
    (dict(epochz=3, ratez=1), 'unknown settings epochz, ratez'),
    (dict(epochs='3'), "Expected epochs='3' to be an int."),
    (dict(epochs=2.0), 'Expected epochs=2.0 to be an int.'),
    (dict(epochs=True), 'Expected epochs=True to be an int.'),
    (dict(rate='0.5'), "Expected rate='0.5' to be a float."),
    (dict(rate=float('nan')), 'Expected rate=nan to be finite.'),
    (dict(widths=4), 'Expected widths=4 to be a list of int.'),
    (dict(widths='44'), "Expected widths='44' to be a list of int."),
    (dict(widths=[4, 2.5]), r'Expected widths\[1\]=2.5 to be an int.'),
    (dict(widths=[]), 'Expected widths to hold at least 1 value'),
    (dict(fancy=1), 'Expected fancy=1 to be a bool.'),
    (dict(rate=1.0), r'Expected rate=1.0 in \(0, 1\).'),
    (dict(epochs=0), 'Expected epochs=0 >= 1.'),
    (dict(widths=[4, 0]), r'Expected widths\[1\]=0 >= 1.'),
    (dict(kind='c'), "Expected kind='c' in 'a', 'b'."),
    (dict(cap=0), 'Expected cap=0 >= 1.'),
    (dict(cap=1, epochs=2), 'Expected cap=1 >= epochs=2.'),
    (dict(seed=-1), 'Expected seed=-1 >= 0.'),
    (dict(num_seeds=0), 'Expected num_seeds=0 >= 1.'),
])
def test_refuses_unknown_keys_wrong_types_and_out_of_range(overrides, match):
  with pytest.raises(ValueError, match=match):
    Demo.preset('quick', **overrides)
  if 'epochz' not in overrides:  # replace checks the same way
    with pytest.raises(ValueError, match=match):
      Demo().replace(**overrides)


def test_none_is_accepted_only_where_declared():
  assert Demo(cap=None).cap is None
  with pytest.raises(ValueError, match='Expected epochs=None to be an int.'):
    Demo(epochs=None)


def test_flags_follow_the_fields():
  mode, given = flags.parse(Demo, [
      '--full', '--rate', '0.25', '--widths', '3', '1', '--fancy', '--cap',
      'none', '--kind', 'b', '--out', 'dir', '--no-progress', '--force'])
  assert mode == 'full'
  assert given == dict(rate=0.25, widths=[3, 1], fancy=True, cap=None,
                       kind='b', out='dir', progress=False, force=True)
  cfg = Demo.preset(mode, **{k: v for k, v in given.items()
                             if k not in ('out', 'progress', 'force')})
  assert cfg.widths == (1, 3) and cfg.fancy and cfg.cap is None
  assert flags.parse(Demo, ['--no-fancy'])[1] == dict(fancy=False)
  assert flags.parse(Demo, [])[0] == 'quick'


@pytest.mark.parametrize('argv, match', [
    (['--epochz', '3'], 'demo: unknown flag --epochz'),
    (['--epoch', '3'], 'unknown flag --epoch'),  # no abbreviations
    (['--options', '{}'], 'unknown flag --options'),  # flag=False
    (['--mode', 'full'], 'unknown flag --mode'),
    (['--epochs', '2.5'], "argument --epochs: invalid int value: '2.5'"),
    (['--rate', 'x'], "argument --rate: invalid float value: 'x'"),
    (['--quick', '--full'], 'not allowed with'),
])
def test_flags_refuse_unknown_flags_and_bad_values(argv, match):
  with pytest.raises(ValueError, match=match):
    flags.parse(Demo, argv)


def test_help_lists_every_field_with_type_and_presets():
  text = ' '.join(flags.parser(Demo).format_help().split())
  for f in dataclasses.fields(Demo):
    flag = '--' + f.name.replace('_', '-')
    assert (flag in text) == f.metadata['flag'], f.name
  assert '--widths INT [INT ...] widths (list of int; default 4, full 8 16)' in (
      text)
  assert '--kind STR a kind (str: a, b; default a)' in text
  assert '--fancy, --no-fancy' in text and '--num-seeds INT' in text
