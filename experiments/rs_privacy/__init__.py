"""DP-SGD vs DP-SGD + random sparsification at fixed epsilon (Table 2 analogue).

At epsilon in {1, 3} (delta = 1e-5) the noise multiplier is calibrated under
RDP for the sampler and number of steps; random sparsification does not change
it (the mask is data-independent, so both methods spend exactly the same
privacy). As in Zhu & Blaschko Sec. 6.2, both methods are tuned over the
same clip grid: every (C, r*) runs on every seed, and per seed DP-SGD picks
C and RS picks (C, r*) on the validation split; each is judged by its test
accuracy at that choice (Table 2). Tuning is not accounted, as in the paper.
Because the choices never see the test split, the test gain carries no
selection bias. Claims: ``_claims``.

Presets: ``_config.Config``. Both on mnist5k (real MNIST digits; the paper's
nearest rows are FMNIST), expected batch 256. Quick: 6 seeds, eps 1 (Table
2's first column), the MLP, C in {0.5, 1}, r* in {0.5, 0.9}, 5 epochs; full:
10 seeds, eps 1 and 3. Full: the 26K-parameter DP-CNN (the
paper's DP-CNN/S), the paper's grids C in {0.1, 0.5, 1} and r* in {0.5,
0.7, 0.9}, 30 epochs.
"""

from experiments.common import runner
from experiments.rs_privacy._claims import claims
from experiments.rs_privacy._config import Config
from experiments.rs_privacy._config import DESCRIPTION
from experiments.rs_privacy._config import NAME
from experiments.rs_privacy._report import report
from experiments.rs_privacy._results import Results
from experiments.rs_privacy._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
