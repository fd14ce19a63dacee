"""Gradient sparsification + the compressive mechanism (Farokhi, Figs. 1-2).

Private full-batch gradient descent on linear regression (Alg. 3): theta_1 =
0, theta_{k+1} = theta_k - rho_k M(g_k), rho_k = 0.1 / sqrt(k), k = 1..T-1,
where g_k is the gradient of f(theta) = mean squared error over the n
training examples. Assumption 1 is enforced per example: each example's
gradient 2 (theta^T x_i - y_i) x_i (closed form) is clipped coordinatewise to
[-xi, xi] (xi = ``linf_clip``) before averaging, for every private method.
The metric is the relative loss f(theta_k) / f(theta*) - 1, theta* the
non-private least-squares solution (float64 lstsq).

Methods (one curve each):

* ``gd``: non-private, full unclipped gradient.
* ``top_k``: non-private, ``keep_top_k`` of the full gradient (eq. 2).
* ``compressive``: Alg. 2 with the certified calibration (Laplace scale
  Delta(Psi) / eps given the sensing matrix;
  ``dpjax.transforms.compressive_mechanism``).
* ``compressive_paper``: Alg. 2 as printed (scale sqrt(p) / eps); its realized
  per-step epsilon given Psi (``CompressiveRelease.epsilon``) is recorded.
* ``laplace``: the unsparsified O(n_theta) baseline the paper compares
  against, Laplace scale 2 xi n_theta / eps on every coordinate (sensitivity
  of the clipped mean for ANY two inputs, as the compressive mechanism uses).
* ``laplace_mean``: unsparsified Laplace with the replace-one sensitivity of
  the mean of per-example clipped gradients, 2 xi n_theta / n. A stronger
  baseline the paper does not consider. The compressive mechanism cannot use
  the 1/n: top-k of the mean can change its support between neighbouring
  datasets, so its input bound is 2 xi kappa whatever n is.

Privacy epsilon is per step (per release), as in the paper; T - 1 releases
compose (basic composition and PLD at ``delta``). Every private method adds
the paper's float Laplace noise (``exact=False``): the sweep traces eps, which
the exact grid samplers (the library default) cannot take, and it keeps the
published numbers; its epsilons are those of ideal real-valued noise.

Presets (``_config.Config``): quick (8 seeds, n = 5,000, per-step eps in {1,
100, 1000, 10^4}, kappa in {1, 3, 5}) and full (20 seeds, n = 10,000, eps from
0.1 to 10^5, kappa in {1, 2, 3, 5, 8, 10, 15, 20}). Seeds and eps of one
method run as one vmapped, jitted program. The cost is the per-example
clipping of n gradients at every step (every private method) plus, for the
compressive mechanism, CoSaMP: 6 (kappa + 1) iterations per step, each a
small Cholesky solve.

Claims (``_claims.py``, one family) are paired by seed: every private method of
seed s runs with the key of seed s. The kappa of the best-kappa claims is picked
per seed on validation runs (seeds offset by ``VALIDATION_OFFSET``, independent
keys), never on the runs that measure it.

Data: features scaled per column to [-1, 1] by the max-abs of the training
set, a constant 1 feature for the intercept, target scaled to [-1, 1] by its
max-abs. This scaling reads the data non-privately, as the paper does
(Assumption 1 presumes known bounds). The whole loaded set (train and test
splits of ``experiments.common.data``) is the training set D: the paper's
objective is a training loss, and no test set is used.
"""

from experiments.common import runner
from experiments.compressive_regression._claims import claims
from experiments.compressive_regression._config import Config
from experiments.compressive_regression._config import DESCRIPTION
from experiments.compressive_regression._config import NAME
from experiments.compressive_regression._report import report
from experiments.compressive_regression._results import Results
from experiments.compressive_regression._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
