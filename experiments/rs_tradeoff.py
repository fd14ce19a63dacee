"""Random sparsification trade-off (Zhu & Blaschko, Figs. 2-3 analogue).

Trains the digits-sized DP-CNN with DP-SGD + random sparsification (Alg. 1:
gradual cooling to the final rate r*, one mask per epoch, noise masked alike)
at fixed noise multiplier sigma and clipping bound C, over r* in {0, 0.3, 0.5,
0.7, 0.9}, and the two ablations with RS: noisy SGD (Alg. 2, no clipping) and
clipped SGD (Alg. 3, no noise). The paper's claim: RS helps when the noise term
(sigma C)^2 dominates, and only in DP-SGD: the ablations lose accuracy as r*
grows. Metric: final train accuracy (as in Fig. 2), test accuracy alongside.

Claims, one per curve and rate r* > 0, paired by seed against r* = 0 on the
same seeds, with Bonferroni over all of them (every rate is reported, none
is picked as "the best", so there is no best-of-k bias): DP-SGD + RS beats
DP-SGD at r*; each ablation with RS loses to itself at r* = 0.

Quick: sigma = 4, C = 1, r* in {0, 0.5, 0.9}, 3 seeds. Full: sigma in {1, 2,
4} x C in {0.25, 0.5, 1}, r* in {0, 0.3, 0.5, 0.7, 0.9}, 10 seeds.
Hyperparameters (lr 0.05, momentum 0.9, expected batch 64) are those of
dpsgd_baseline, not tuned for RS.
"""

import itertools
import math
import time
from typing import Any

import jax
import matplotlib.pyplot as plt

import dpjax

from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import train as train_lib
from experiments.common import verdict as verdict_lib

NAME = 'rs_tradeoff'
DESCRIPTION = 'accuracy vs sparsification rate for sigma x C, with ablations'
MODES = {
    'quick': dict(dataset='digits', sigmas=[4.0], clips=[1.0],
                  rates=[0.0, 0.5, 0.9], num_seeds=3, epochs=10),
    'full': dict(dataset='digits', sigmas=[1.0, 2.0, 4.0],
                 clips=[0.25, 0.5, 1.0], rates=[0.0, 0.3, 0.5, 0.7, 0.9],
                 num_seeds=10, epochs=30),
}
DEFAULTS = dict(seed=0, delta=1e-5,
                learning_rate=0.05, momentum=0.9, expected_batch_size=64,
                evals=5)


def config(mode: str, epsilons=None, **overrides) -> dict[str, Any]:
  """The exact configuration; this experiment fixes sigma, not epsilon."""
  if epsilons is not None:
    raise ValueError(f'{NAME} fixes noise multipliers, not epsilons; '
                     'drop --epsilons')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  data_lib.require_classification(NAME, cfg['dataset'])
  if 0.0 not in cfg['rates'] or len(cfg['rates']) < 2:
    raise ValueError(f"Expected rates={cfg['rates']} to hold 0 (the "
                     'reference every claim compares with) and one rate > 0.')
  return cfg


def _settings(cfg):
  """(setting, sigma, C, ablation) for every curve."""
  out = [('dpsgd', s, c, None) for s, c in
         itertools.product(cfg['sigmas'], cfg['clips'])]
  out += [('noisy_sgd', s, max(cfg['clips']), 'noisy_sgd')
          for s in cfg['sigmas']]
  out += [('clipped_sgd', None, c, 'clipped_sgd') for c in cfg['clips']]
  return out


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  start = time.time()
  ds = data_lib.load(cfg['dataset'], seed=cfg['seed'],
                     fallback=cfg.get('allow_fallback', False))
  model_name = models.default_model_name(ds.name)
  model = models.make_model(model_name, ds.num_classes,
                            input_shape=ds.input_shape)
  steps = train_lib.steps_for_epochs(cfg['epochs'], cfg['expected_batch_size'],
                                     len(ds.x_train))
  runs = []
  seeds = range(cfg['seed'], cfg['seed'] + cfg['num_seeds'])
  for setting, sigma, clip, ablation in _settings(cfg):
    for rate in cfg['rates']:
      tc = train_lib.TrainConfig(
          steps=steps, expected_batch_size=cfg['expected_batch_size'],
          learning_rate=cfg['learning_rate'], momentum=cfg['momentum'],
          l2_norm_clip=clip, noise_multiplier=sigma, ablation=ablation,
          sparsify_rate=rate, eval_every=max(1, steps // cfg['evals']))
      runs += train_lib.run_seeds_and_record(
          model, ds, tc, seeds, delta=cfg['delta'], out_dir=out_dir,
          label=f'{setting} sigma={sigma} C={clip} r={rate}',
          progress=progress, model=model_name, setting=setting,
          sigma=sigma, clip=clip, rate=rate)
  summary = report_lib.summarize_over_seeds(
      runs, ('setting', 'sigma', 'clip', 'rate'),
      ('train_accuracy', 'test_accuracy'))
  params = model.init(jax.random.key(0), ds.x_train[0])
  d = models.num_params(params)
  spe = max(1, round(len(ds.x_train) / cfg['expected_batch_size']))
  bits = {r: dpjax.transforms.rs_dpsgd_bits(
      dpjax.transforms.SparsityMaskSchedule.cooling(
          r, math.ceil(steps / spe), spe, params), d)[:steps]
          for r in cfg['rates']}
  dense = dpjax.transforms.dpsgd_bits(params)
  for row in summary:  # sparse messages: values + positions once per epoch
    row['bits_per_step'] = float(bits[row['rate']].mean())
    row['bits_vs_dense'] = row['bits_per_step'] / dense
  return dict(experiment=NAME, config=cfg, dataset=report_lib.dataset_info(ds),
              model=model_name, steps=steps, runs=runs, summary=summary,
              claims=claims(runs), wall_seconds=round(time.time() - start,
                                                            1))


def claims(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per curve and rate r* > 0: train accuracy at r* minus at r* = 0, paired
  by seed; DP-SGD claims a gain, the ablations a loss. Bonferroni over all."""
  curves: dict[tuple, dict] = {}
  for r in sorted(runs, key=lambda r: r['seed']):
    curves.setdefault((r['setting'], r['sigma'], r['clip']), {}).setdefault(
        r['rate'], []).append(r['train_accuracy'])
  m = sum(len(rates) - 1 for rates in curves.values())
  out = []
  for (setting, sigma, clip), by_rate in curves.items():
    helps = setting == 'dpsgd'
    name = (f'DP-SGD sigma C={sigma * clip:g}' if helps else
            f'{setting} ' + (f'sigma={sigma:g}' if sigma else f'C={clip:g}'))
    for rate, acc in by_rate.items():
      if rate == 0:
        continue
      v = verdict_lib.paired_verdict(acc, by_rate[0.0], comparisons=m,
                                     higher_is_better=helps)
      out.append(verdict_lib.claim(
          f"{name}: r*={rate:g} {'beats' if helps else 'loses to'} r*=0 "
          '(train acc)', v, setting=setting, sigma=sigma, clip=clip,
          rate=rate))
  return out


COLUMNS = [('setting', 'setting'), ('sigma', 'sigma'), ('clip', 'C'),
           ('rate', 'final rate r*'), ('train_accuracy_mean', 'train acc'),
           ('train_accuracy_std', 'std'), ('test_accuracy_mean', 'test acc'),
           ('epsilon_rdp', 'eps (RDP)'), ('bits_vs_dense', 'bits vs dense'),
           ('seeds', 'seeds')]


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
  curves: dict[tuple, list] = {}
  for row in results['summary']:
    curves.setdefault((row['setting'], row['sigma'], row['clip']), []).append(
        row)
  for (setting, sigma, clip), rows in curves.items():
    ax = axes[0] if setting == 'dpsgd' else axes[1]
    label = (f'DP-SGD sigma={sigma:g} C={clip:g}' if setting == 'dpsgd' else
             f'{setting} ' + (f'sigma={sigma:g}' if sigma else f'C={clip:g}'))
    ax.errorbar([r['rate'] for r in rows],
                [r['train_accuracy_mean'] for r in rows],
                yerr=[r['train_accuracy_std'] for r in rows], marker='o',
                capsize=2, label=label)
  for ax, title in zip(axes, ('DP-SGD + RS', 'ablations + RS')):
    ax.set_xlabel('final sparsification rate r*')
    ax.set_title(title)
    ax.legend(fontsize=6)
  axes[0].set_ylabel('train accuracy')
  return [report_lib.save_figure(fig, out_dir, 'accuracy_vs_rate.png')]


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  pngs = plot(results, out_dir)
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      report_lib.dataset_line(results['dataset']), '',
      f"Model {results['model']}, {results['steps']} steps ({cfg['epochs']} "
      f"epochs, expected batch {cfg['expected_batch_size']}), lr "
      f"{cfg['learning_rate']}, momentum {cfg['momentum']}, gradual cooling, "
      f"one mask per epoch; seeds {cfg['seed']}.."
      f"{cfg['seed'] + cfg['num_seeds'] - 1}. Epsilon (delta "
      f"{cfg['delta']:g}) is the same for every r* at a given sigma.", '',
      report_lib.markdown_table(results['summary'], COLUMNS), '',
      '**Claims** (every rate against r* = 0 on the same seeds; verdicts per '
      'the rule at the top):', '',
      verdict_lib.claims_table(results['claims']),
  ]
  lines += [''] + [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
