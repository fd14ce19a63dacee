"""finetune's claims, paired by seed, each method's learning rate chosen on
the validation split.

Primary (Yu et al. 2022, "Differentially Private Fine-tuning of Language
Models": private fine-tuning of a publicly pretrained model is far
more accurate than private training, and low-rank adapters match full
fine-tuning): at the smallest epsilon, full and LoRA fine-tuning beat
training from scratch, and LoRA is within ``lora_margin`` of full
fine-tuning at the smallest and the largest epsilon. Sanity: private LoRA
fine-tuning improves on the pretrained model, the non-private ceiling beats
private full fine-tuning, and a larger epsilon helps full fine-tuning.
"""

import numpy as np

from experiments.common import claims as claims_lib
from experiments.finetune._config import Config
from experiments.finetune._results import Results


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  runs = results.private
  lo, hi = str(min(cfg.epsilons)), str(max(cfg.epsilons))
  acc = lambda kind, eps: runs[kind][eps]['selected_test']
  main = claims_lib.ClaimFamily('fine-tuning')
  main.add(f'private full fine-tuning beats private training from scratch '
           f'at eps = {float(lo):g} (test acc)', acc('full', lo),
           acc('scratch', lo), kind='paper')
  main.add(f'private LoRA (r = {cfg.rank}) fine-tuning beats private '
           f'training from scratch at eps = {float(lo):g} (test acc)',
           acc('lora', lo), acc('scratch', lo), kind='paper')
  for eps in (lo, hi):
    main.add(f'LoRA within {cfg.lora_margin:g} of full fine-tuning at eps = '
             f'{float(eps):g} (test acc)', acc('lora', eps), acc('full', eps),
             threshold=-cfg.lora_margin, kind='paper')
  sanity = claims_lib.ClaimFamily('sanity')
  sanity.add(f'private LoRA fine-tuning at eps = {float(lo):g} improves on '
             'the pretrained model (test acc)',
             list(np.asarray(acc('lora', lo)) -
                  results.pretrained.test), kind='sanity',
             remedy='more fine-tuning steps or a larger epsilon, until '
             'private LoRA improves on the pretrained model')
  sanity.add(f'non-private fine-tuning beats private full fine-tuning at '
             f'eps = {float(lo):g} (test acc)',
             results.non_private['full']['selected_test'], acc('full', lo),
             kind='sanity', remedy='a smaller epsilon, until privacy costs '
             'full fine-tuning accuracy')
  sanity.add(f'full fine-tuning at eps = {float(hi):g} beats eps = '
             f'{float(lo):g} (test acc)', acc('full', hi), acc('full', lo),
             kind='sanity', remedy='epsilons further apart, until the '
             'budget shows in the accuracy')
  return [main, sanity]
