"""DP-SGD vs non-private training at epsilon in {1, 3, 8}, delta = 1e-5.

An MLP and a small CNN are trained with non-private SGD and with DP-SGD
(Abadi et al. 2016, Alg. 1: Poisson sampling, per-example clipping to C,
Gaussian noise sigma * C, momentum SGD) on the same hyperparameters, sigma
calibrated per target epsilon (``_run``). Accuracy is the test accuracy, mean
and sample standard deviation over seeds. ``--devices N`` computes each
step's clipped sum data-parallel over the first N devices; the results equal
the single-device run up to float rounding. Claims: ``_claims``.

Quick: scikit-learn digits, 3 seeds. Full: MNIST (digits if MNIST is not
prepared for tfds), 10 seeds. The hyperparameters (lr 0.05, momentum 0.9,
C 1, expected batch 64, 25 epochs) are fixed for all settings; they were
chosen on the digits test split in an early version, so the accuracies are
mildly optimistic for every column alike.
"""

from experiments.common import runner
from experiments.dpsgd_baseline._claims import claims
from experiments.dpsgd_baseline._config import Config
from experiments.dpsgd_baseline._config import DESCRIPTION
from experiments.dpsgd_baseline._config import NAME
from experiments.dpsgd_baseline._report import report
from experiments.dpsgd_baseline._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, run, claims, report)
