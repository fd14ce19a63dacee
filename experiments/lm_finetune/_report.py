"""lm_finetune's report body: the setting and one table."""

import math

import numpy as np

from experiments.common import report as report_lib
from experiments.common.results import Rows
from experiments.lm_finetune._config import Config
from experiments.lm_finetune._results import Results
from experiments.lm_finetune._run import NON_PRIVATE

COLUMNS = [('run', 'run'), ('eps', 'target eps'),
           ('loss', 'test loss (nats/byte)'), ('std', 'std'),
           ('perplexity', 'perplexity'), ('epsilon', 'eps (read from the run)'),
           ('sigma', 'noise multiplier')]
NAMES = {'full': 'full fine-tuning', 'lora': 'LoRA fine-tuning'}


def _rows(results: Results) -> Rows:
  rows = [dict(run='pretrained on public code, no fine-tuning',
               loss=results.pretrained_test_loss,
               perplexity=math.exp(results.pretrained_test_loss))]
  for kind, name in NAMES.items():
    for eps, part in results.runs[kind].items():
      test = np.asarray(part.test_loss)
      rows.append(dict(
          run=('non-private ' if eps == NON_PRIVATE else 'private ') + name,
          eps=None if eps == NON_PRIVATE else float(eps),
          loss=float(test.mean()), std=float(test.std(ddof=1)),
          perplexity=math.exp(float(test.mean())), epsilon=part.epsilon,
          sigma=part.noise_multiplier))
  return rows


def _setting(results: Results, cfg: Config) -> str:
  dims = results.dimensions
  return (
      f'A byte-level GPT decoder ({cfg.layers} pre-LN blocks, width '
      f'{cfg.width}, {cfg.heads} heads, causal attention, learned positions, '
      'the output layer the transposed input embedding) reads '
      f'{cfg.seq_len}-byte windows. It is pretrained without privacy on '
      f'{results.corpus.windows["public"]} windows of the library\'s modules '
      f'(AdamW, {cfg.pretrain_steps} steps; its public loss '
      f'{results.pretrained_public_loss:.3f}), then fine-tuned on '
      f'{results.corpus.windows["train"]} windows of the test suite with '
      f'DP-Adam (ghost clipping, C = {cfg.l2_norm_clip:g}, Poisson q = '
      f'{results.sampling_rate:.4f}, {results.steps} steps, delta = '
      f'{cfg.delta:g}; Adam step {cfg.full_learning_rate:g} full, '
      f'{cfg.lora_learning_rate:g} LoRA). Full fine-tuning noises '
      f'{dims["full"]} numbers per step, LoRA (rank {cfg.rank} on every '
      f'Dense, the rest frozen) {dims["lora"]}. The non-private rows run the '
      'same program and batches with noise 0 and a clip of 1e6. Corpus '
      f'digest {results.corpus.digest[:16]}.')


def report(results: Results, cfg: Config, claims: Rows, out_dir: str
           ) -> str:
  del claims, out_dir  # the runner's claims table shows them
  return '\n'.join([
      report_lib.dataset_line(results.dataset) + ' (private: the test '
      'suite\'s files; public: the modules)', '', _setting(results, cfg), '',
      report_lib.markdown_table(_rows(results), COLUMNS), ''])
