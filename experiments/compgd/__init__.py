"""Compressed private gradient descent vs DP-GD (Huang thesis, Figs. 7.1-7.3).

Full-batch logistic regression over an l1 ball on generated data: n = 3000
points uniform on the unit sphere in R^d, labels ~ Bernoulli(sigmoid(<z,
w*>)) with w* of intrinsic dimension (sparsity) k, validation and test sets
of 1000 points each (``num_examples``, ``num_val``, ``num_test``).
Four optimizers from ``dpjax.transforms`` run for T epochs (T full-batch
steps) from w = 0 and output the step-size-weighted average iterate: GD
(``projected_gd``), CompGD (``compgd``), DP-GD (``dp_projected_gd``) and
DP-CompGD (``dp_compgd``), m = d / 10. The private methods spend (eps,
delta) = (2, 0.01) per run; sigma is calibrated for each T with the RDP
accountant (``accounting.calibrate`` of ``gaussian_event``; PLD epsilon
reported too). Step size eta_t = learning_rate_scale * ||w*||_1 / sqrt(t
(G^2 + c s^2)) (thesis Thm 7.1's form), G = L / sqrt(d) the public gradient
scale of isotropic unit-norm features, s the per-coordinate noise stddev and
c the number of noisy coordinates (m or d); non-private methods have s = 0.
learning_rate_scale = 3 is the value of {1, 3, 10} with the lowest
non-private GD excess risk at d = 1000, 5 epochs (0.128, 0.018, 0.022 on 3
seeds); the DP comparison depends on it (at 10, DP-GD gains more than
DP-CompGD), see the issue note.

Presets: ``_config.Config``. Seeds run vmapped in one jitted program per
(method, d, k); the number of epochs is a traced argument, so one compile
serves every T. Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.compgd._claims import claims
from experiments.compgd._config import Config
from experiments.compgd._config import DESCRIPTION
from experiments.compgd._config import NAME
from experiments.compgd._report import report
from experiments.compgd._results import Results
from experiments.compgd._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
