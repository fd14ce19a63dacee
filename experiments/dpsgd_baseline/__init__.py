"""DP-SGD vs non-private training at epsilon in {1, 3, 8}, delta = 1e-5.

An MLP (and, in full mode, the dataset's small CNN) is trained with
non-private SGD and with DP-SGD (Abadi et al. 2016, Alg. 1: Poisson
sampling, per-example clipping to C, Gaussian noise sigma * C, momentum SGD)
on the same hyperparameters, sigma calibrated per target epsilon (``_run``).
Each seed chooses its clip norm C from a grid on the validation split, and
its test accuracy at that C is its result (the choice never sees the test
split); this is the tuned DP-SGD baseline that random sparsification
(``rs_tradeoff``, ``rs_privacy``) is compared with. Accuracy is the test
accuracy, mean and SEM over seeds. ``--devices N`` computes each step's
clipped sum data-parallel over the first N devices; the results equal the
single-device run up to float rounding. Claims: ``_claims``.

Both presets: mnist5k (5,000 real MNIST digits, 3,500 / 500 / 1,000
train / validation / test), 6 seeds (full: 10), expected batch 256, lr 0.2, momentum
0.9 (fixed a priori, not tuned on the test split). Quick: the MLP, C in {0.5,
1}, 5 epochs. Full: the MLP and the 26K-parameter DP-CNN, C in {0.1, 0.5,
1} (the grid of Zhu & Blaschko Sec. 6.2), 30 epochs. On a set without a
validation split (digits), ``validation_fraction`` of train is held out.
"""

from experiments.common import runner
from experiments.dpsgd_baseline._claims import claims
from experiments.dpsgd_baseline._config import Config
from experiments.dpsgd_baseline._config import DESCRIPTION
from experiments.dpsgd_baseline._config import NAME
from experiments.dpsgd_baseline._report import report
from experiments.dpsgd_baseline._results import Results
from experiments.dpsgd_baseline._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
