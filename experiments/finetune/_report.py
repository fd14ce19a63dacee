"""finetune's report body: the setting and one table."""

from typing import Any

import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.finetune._config import Config
from experiments.finetune._results import Results

NAMES = {'scratch': 'private, from scratch',
         'full': 'private full fine-tuning',
         'lora': 'private LoRA fine-tuning'}
COLUMNS = [('run', 'run'), ('eps', 'target eps'), ('test_mean', 'test acc'),
           ('test_std', 'std'), ('epsilon', 'eps (RDP, read from the run)'),
           ('sigma', 'noise multiplier'), ('dimension', 'noised dimension'),
           ('note', 'lr chosen per seed')]


def _row(run: str, part: dict[str, Any], **extra) -> dict[str, Any]:
  test = np.asarray(part['selected_test'])
  return dict(run=run, test_mean=float(test.mean()),
              test_std=float(test.std(ddof=1)) if len(test) > 1 else None,
              note=', '.join(f'{lr:g}' for lr in part['chosen_lr']), **extra)


def _rows(results: Results) -> list[dict[str, Any]]:
  """The pretrained model, every private (method, eps), the ceilings."""
  pre = results.pretrained
  rows = [dict(run='pretrained on public digits, no fine-tuning',
               test_mean=pre.test,
               note=f'public train acc {pre.public_train:.3f}')]
  for kind, name in NAMES.items():
    for eps, part in results.private[kind].items():
      rows.append(_row(name, part, eps=float(eps), epsilon=part['epsilon'],
                       sigma=part['noise_multiplier'],
                       dimension=part['dimension']))
  for kind, name in NAMES.items():
    rows.append(_row(name.replace('private', 'non-private', 1) + (
        ' (ceiling)' if kind == 'full' else ''),
                     results.non_private[kind],
                     dimension=results.non_private[kind]['dimension']))
  return rows


def _setting(results: Results, cfg: Config) -> str:
  """The paragraph: pretraining, the private fine-tuning, LoRA's size."""
  public = results.public
  return (
      f"784-{cfg.hidden}-10 tanh MLP pretrained without privacy on the "
      f'public {public.name} ({public.n} images, AdamW, '
      f'{cfg.pretrain_epochs} epochs, random shifts of up to '
      f"{cfg.pretrain_shift} pixels), then fine-tuned on MNIST-5k's "
      'train split with DP-SGD (ghost clipping, C = '
      f'{cfg.l2_norm_clip:g}, momentum {cfg.momentum}), Poisson sampling q = '
      f'{results.sampling_rate:.4f} (expected batch '
      f'{cfg.expected_batch_size}), {results.steps} steps, delta = '
      f'{cfg.delta:g}. The non-private rows run the same program and '
      'batches with noise 0 and a clip of 1e6 (never reached). LoRA: rank '
      f'{cfg.rank} adapters on both layers '
      f'(scale alpha / r = {cfg.alpha / cfg.rank:g}), the pretrained '
      'weights frozen: only the adapters are clipped and noised, '
      f"{results.bits['lora']} bits per noisy update against "
      f"{results.bits['full']} for full fine-tuning. Each (method, eps) "
      'picks its learning rate per seed on the validation split (the '
      'selection is not accounted, as usual).')


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims, out_dir  # the runner's claims table shows them
  return '\n'.join([
      report_lib.dataset_line(results.dataset) + ' (private; validation: '
      'the fixed 500-image split)', '', _setting(results, cfg), '',
      report_lib.markdown_table(_rows(results), COLUMNS), ''])
