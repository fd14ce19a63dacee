"""Private fine-tuning of a publicly pretrained model, full and low-rank.

A 784-h-10 tanh MLP is pretrained without privacy on a public set
(scikit-learn's 1,797 ``digits``, 8x8 images upsampled to 20x20 and padded
to 28x28 like MNIST's digits) and fine-tuned with DP-SGD on MNIST-5k's
train split (the private data; validation split for the learning rate):
training from scratch, full fine-tuning, LoRA fine-tuning (Hu et al. 2022;
only the rank-r adapters are clipped and noised, ``dpjax.finetune``), the
non-private fine-tuning ceiling and the pretrained model as it is. The
claim that private fine-tuning of a public model beats private training from
scratch, and that LoRA is close to full fine-tuning, is that of Yu et al.
2022, "Differentially Private Fine-tuning of Language Models", and Li et
al. 2022 (ICLR). Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.finetune._claims import claims
from experiments.finetune._config import Config
from experiments.finetune._config import DESCRIPTION
from experiments.finetune._config import NAME
from experiments.finetune._report import report
from experiments.finetune._results import Results
from experiments.finetune._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
