"""Random sparsification trade-off (Zhu & Blaschko, Figs. 2-3).

Trains DP-SGD + random sparsification (Alg. 1: gradual cooling to the final
rate r*, one mask per epoch, noise masked alike) at fixed noise multiplier
sigma and clipping bound C, over r*, and the two ablations with RS: noisy SGD
(Alg. 2, no clipping) and clipped SGD (Alg. 3, no noise). The paper's claim:
RS helps when the noise term (sigma C)^2 dominates (Fig. 2f, 2h: more than 4
points at sigma C = 2), keeps accuracy at sigma C = 1, and only in DP-SGD:
the ablations lose accuracy as r* grows (Fig. 3). Each run is scored on the
train split (Fig. 2's metric), on the validation split (r* is chosen there,
per seed) and on the test split (where the chosen r* is judged). A
non-private row on the same batches is the sanity ceiling. Claims:
``_claims``.

Presets: ``_config.Config``. Both on mnist5k (real MNIST digits) with 10
seeds. Quick: the two panels (sigma, C) = (1, 1/4) and (4, 1/2) (sigma C =
0.25 and 2) with r* in {0, 0.5, 0.9}, and one ablation curve each. Full: the
3 x 3 grid sigma in {1, 2, 4} x C in {1/4, 1/2, 1} of Fig. 2, r* in {0, 0.3,
0.5, 0.7, 0.9}, every ablation of Fig. 3, 30 epochs, and the dataset's
default model (``model=''``: the 26K-parameter DP-CNN for MNIST, the model
of the paper's FMNIST rows). Quick trains the 784-64-10 MLP for 5 epochs
instead: on CPU the CNN's per-example gradients cost about 20 times as much.
The paper trains DP-CNN on CIFAR-10 with batch 1000 for 100 epochs; here the
expected batch is 256 (3,500 training digits), lr 0.2, momentum 0.9, fixed
a priori for every curve.
"""

from experiments.common import runner
from experiments.rs_tradeoff._claims import claims
from experiments.rs_tradeoff._config import Config
from experiments.rs_tradeoff._config import DESCRIPTION
from experiments.rs_tradeoff._config import NAME
from experiments.rs_tradeoff._report import report
from experiments.rs_tradeoff._results import Results
from experiments.rs_tradeoff._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
