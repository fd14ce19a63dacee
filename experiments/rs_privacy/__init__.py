"""DP-SGD vs DP-SGD + random sparsification at fixed epsilon (Table 2 analogue).

At epsilon in {1, 3} (delta = 1e-5) the noise multiplier is calibrated under
RDP for the sampler and number of steps; random sparsification does not change
it (the mask is data-independent, so both methods spend exactly the same
privacy). The final rate r* is tuned over {0.5, 0.7, 0.9} on a validation split
held out of the training data (seed ``seed`` only; tuning itself is not
accounted, as in the paper), then both methods are run on ``num_seeds`` seeds
(one vmapped program per method) and compared on the test set (Zhu &
Blaschko, Table 2). Claims: ``_claims``. r* is chosen on validation data
before the test runs, so the test gain carries no selection bias.

Presets: ``_config.Config`` (quick: 3 seeds; full: 10 seeds).
"""

from experiments.common import runner
from experiments.rs_privacy._claims import claims
from experiments.rs_privacy._config import Config
from experiments.rs_privacy._config import DESCRIPTION
from experiments.rs_privacy._config import NAME
from experiments.rs_privacy._report import report
from experiments.rs_privacy._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, run, claims, report)
