"""Distributed DP mean estimation: DDG and Skellam vs cpSGD and the Gaussian.

Kairouz, Liu, Steinke (ICML 2021) and Agarwal, Kairouz, Liu (NeurIPS 2021):
n clients hold unit vectors in random directions; each protocol releases
their mean under secure aggregation at a matched target epsilon (replace-one
client, one release), and the MSE is measured against the true mean at
every b in ``bits``:

* DDG and Skellam (``dpjax.distributed.secure_sum_round``), gamma and noise
  from ``calibrate_distributed_dp``; the wrap-around rate, the rounds it
  flags and the conditional-rounding failures are reported;
* cpSGD (``dpjax.distributed.distributed_mean``, rotation on), at the k of
  smallest analytic MSE bound among those that fit a b-bit modular sum of
  n messages in {0..k-1+m} (m from Theorem 1);
* the central Gaussian (32-bit floats; PLD-calibrated).

Claims in ``_claims``; presets in ``_config.Config``.

Full mode (``training=True``; off in quick, where it can be turned on) also
trains a classifier on digits on the shared federated loop with DDG and
Skellam at every b in ``train_bits``, cpSGD where it fits a b-bit sum (or
at the fewest bits where it fits) and the Gaussian, all at one total
(``train_epsilon``, ``delta``) over the run's rounds, and reports test
accuracy vs bits, the flagged (wrap-around) rounds and its own claim
family (``_training``, ``_claims.training_plan``).
"""

from experiments.common import runner
from experiments.distributed_dp._claims import claims
from experiments.distributed_dp._config import Config
from experiments.distributed_dp._config import DESCRIPTION
from experiments.distributed_dp._config import NAME
from experiments.distributed_dp._report import report
from experiments.distributed_dp._results import Results
from experiments.distributed_dp._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
