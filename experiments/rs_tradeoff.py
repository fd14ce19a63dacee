"""Random sparsification trade-off (Zhu & Blaschko, Figs. 2-3 analogue).

Trains the digits-sized DP-CNN with DP-SGD + random sparsification (Alg. 1:
gradual cooling to the final rate r*, one mask per epoch, noise masked alike)
at fixed noise multiplier sigma and clipping bound C, over r* in {0, 0.3, 0.5,
0.7, 0.9}, and the two ablations with RS: noisy SGD (Alg. 2, no clipping) and
clipped SGD (Alg. 3, no noise). The paper's claim: RS helps when the noise term
(sigma C)^2 dominates, and only in DP-SGD: the ablations lose accuracy as r*
grows. Metric: final train accuracy (as in Fig. 2), test accuracy alongside.

Quick: sigma in {1, 4}, C = 1, 1 seed. Full: sigma in {1, 2, 4} x C in {0.25,
0.5, 1}, 3 seeds. Hyperparameters (lr 0.05, momentum 0.9, expected batch 64)
are those of dpsgd_baseline, not tuned for RS.
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

NAME = 'rs_tradeoff'
DESCRIPTION = 'accuracy vs sparsification rate for sigma x C, with ablations'
MODES = {
    'quick': dict(dataset='digits', sigmas=[1.0, 4.0], clips=[1.0],
                  num_seeds=1, epochs=10),
    'full': dict(dataset='digits', sigmas=[1.0, 2.0, 4.0],
                 clips=[0.25, 0.5, 1.0], num_seeds=3, epochs=30),
}
DEFAULTS = dict(seed=0, rates=[0.0, 0.3, 0.5, 0.7, 0.9], delta=1e-5,
                learning_rate=0.05, momentum=0.9, expected_batch_size=64,
                evals=5)


def config(mode: str, epsilons=None, **overrides) -> dict[str, Any]:
  """The exact configuration; this experiment fixes sigma, not epsilon."""
  if epsilons is not None:
    raise ValueError(f'{NAME} fixes noise multipliers, not epsilons; '
                     'drop --epsilons')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
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
  ds = data_lib.load(cfg['dataset'], seed=cfg['seed'])
  model_name = models.default_model_name(ds.name)
  model = models.make_model(model_name, ds.num_classes,
                            input_shape=ds.input_shape)
  steps = train_lib.steps_for_epochs(cfg['epochs'], cfg['expected_batch_size'],
                                     len(ds.x_train))
  runs = []
  for setting, sigma, clip, ablation in _settings(cfg):
    for rate in cfg['rates']:
      for seed in range(cfg['seed'], cfg['seed'] + cfg['num_seeds']):
        tc = train_lib.TrainConfig(
            steps=steps, expected_batch_size=cfg['expected_batch_size'],
            learning_rate=cfg['learning_rate'], momentum=cfg['momentum'],
            l2_norm_clip=clip, noise_multiplier=sigma, ablation=ablation,
            sparsify_rate=rate, eval_every=max(1, steps // cfg['evals']),
            seed=seed)
        runs.append(train_lib.run_and_record(
            model, ds, tc, delta=cfg['delta'], out_dir=out_dir,
            label=f'{setting} sigma={sigma} C={clip} r={rate} seed={seed}',
            progress=progress, model=model_name, setting=setting,
            sigma=sigma, clip=clip, rate=rate))
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
              verdicts=verdicts(summary), wall_seconds=round(time.time() - start,
                                                            1))


def verdicts(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Per curve: accuracy at r* = 0, the best r* > 0, and the gain."""
  curves: dict[tuple, list] = {}
  for row in summary:
    curves.setdefault((row['setting'], row['sigma'], row['clip']), []).append(
        row)
  out = []
  for (setting, sigma, clip), rows in curves.items():
    dense = next(r for r in rows if r['rate'] == 0)
    best = max((r for r in rows if r['rate'] > 0),
               key=lambda r: r['train_accuracy_mean'])
    out.append(dict(setting=setting, sigma=sigma, clip=clip,
                    noise_scale=None if sigma is None else sigma * clip,
                    acc_dense=dense['train_accuracy_mean'],
                    best_rate=best['rate'],
                    acc_best=best['train_accuracy_mean'],
                    gain=best['train_accuracy_mean'] -
                    dense['train_accuracy_mean']))
  return out


COLUMNS = [('setting', 'setting'), ('sigma', 'sigma'), ('clip', 'C'),
           ('rate', 'final rate r*'), ('train_accuracy_mean', 'train acc'),
           ('train_accuracy_std', 'std'), ('test_accuracy_mean', 'test acc'),
           ('epsilon_rdp', 'eps (RDP)'), ('bits_vs_dense', 'bits vs dense'),
           ('seeds', 'seeds')]
VERDICT_COLUMNS = [('setting', 'setting'), ('sigma', 'sigma'), ('clip', 'C'),
                   ('noise_scale', 'sigma C'), ('acc_dense', 'acc r*=0'),
                   ('best_rate', 'best r*'), ('acc_best', 'acc best r*'),
                   ('gain', 'gain')]


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
  dp = [v for v in results['verdicts'] if v['setting'] == 'dpsgd']
  ablations = [v for v in results['verdicts'] if v['setting'] != 'dpsgd']
  loudest = max(dp, key=lambda v: v['noise_scale'])
  helped = loudest['gain'] > 0
  ablations_lost = all(v['gain'] <= 0 for v in ablations)
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
      '**Claim check** (gain = best r* > 0 minus r* = 0, train accuracy):', '',
      report_lib.markdown_table(results['verdicts'], VERDICT_COLUMNS), '',
      f"- RS helps DP-SGD at the largest noise (sigma C = "
      f"{loudest['noise_scale']:g}): **{'yes' if helped else 'no'}** "
      f"(gain {loudest['gain']:+.4f} at r* = {loudest['best_rate']}).",
      f"- The ablations only lose with RS: "
      f"**{'yes' if ablations_lost else 'no'}** (gains "
      f"{', '.join(format(v['gain'], '+.4f') for v in ablations)}).",
  ]
  if cfg['num_seeds'] == 1:
    lines.append('- One seed: gains smaller than about 0.01 are within '
                 'seed-to-seed variation (see dpsgd_baseline std).')
  lines += [''] + [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
