"""lm_finetune's claims, paired by seed; losses in nats per byte, so a
relative perplexity margin m is a loss margin ln(1 + m).

Primary (Li et al. 2022, "Large Language Models Can Be Strong
Differentially Private Learners"; Yu et al. 2022, "Differentially Private
Fine-tuning of Language Models"): private fine-tuning of a publicly
pretrained decoder at the largest epsilon comes within ``private_margin``
of its non-private twin's perplexity, and LoRA comes within
``lora_margin`` of full fine-tuning at the smallest and the largest
epsilon (kind ``paper``: the papers' statements, at this project's
margins). Sanity: non-private fine-tuning improves on the pretrained model
(the private split differs from the public one), and a larger epsilon helps
full fine-tuning.
"""

import math

import numpy as np

from experiments.common import claims as claims_lib
from experiments.lm_finetune._config import Config
from experiments.lm_finetune._results import Results
from experiments.lm_finetune._run import NON_PRIVATE


def claims(results: Results, cfg: Config) -> list[claims_lib.ClaimFamily]:
  loss = lambda kind, eps: results.runs[kind][eps].test_loss
  lo, hi = str(min(cfg.epsilons)), str(max(cfg.epsilons))
  main = claims_lib.ClaimFamily('fine-tuning')
  main.add(f'private full fine-tuning at eps = {float(hi):g} within '
           f'{cfg.private_margin:.0%} of the non-private perplexity',
           loss('full', hi), loss('full', NON_PRIVATE),
           threshold=math.log1p(cfg.private_margin), higher_is_better=False,
           kind='paper')
  for eps in (lo, hi):
    main.add(f'LoRA (r = {cfg.rank}) within {cfg.lora_margin:.0%} of full '
             f'fine-tuning\'s perplexity at eps = {float(eps):g}',
             loss('lora', eps), loss('full', eps),
             threshold=math.log1p(cfg.lora_margin), higher_is_better=False,
             kind='paper')
  sanity = claims_lib.ClaimFamily('sanity')
  sanity.add('non-private full fine-tuning improves on the pretrained '
             'model (test loss)', list(np.asarray(loss('full', NON_PRIVATE))
                                       - results.pretrained_test_loss),
             higher_is_better=False, kind='sanity',
             remedy='more fine-tuning steps or a larger step, until the '
             'non-private twin learns the private domain')
  sanity.add(f'full fine-tuning at eps = {float(hi):g} beats eps = '
             f'{float(lo):g} (test loss)', loss('full', hi), loss('full', lo),
             higher_is_better=False, kind='sanity',
             remedy='epsilons further apart or more seeds, until the noise '
             'level shows in the loss')
  return [main, sanity]
