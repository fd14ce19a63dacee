"""Random sparsification trade-off (Zhu & Blaschko, Figs. 2-3 analogue).

Trains the digits-sized DP-CNN with DP-SGD + random sparsification (Alg. 1:
gradual cooling to the final rate r*, one mask per epoch, noise masked alike)
at fixed noise multiplier sigma and clipping bound C, over r* in {0, 0.3, 0.5,
0.7, 0.9}, and the two ablations with RS: noisy SGD (Alg. 2, no clipping) and
clipped SGD (Alg. 3, no noise). The paper's claim: RS helps when the noise term
(sigma C)^2 dominates, and only in DP-SGD: the ablations lose accuracy as r*
grows. Metric: final train accuracy (as in Fig. 2), test accuracy alongside.
Claims: ``_claims``.

Presets: ``_config.Config``. Quick: sigma = 4, C = 1, r* in {0, 0.5, 0.9},
3 seeds. Full: sigma in {1, 2, 4} x C in {0.25, 0.5, 1}, r* in {0, 0.3, 0.5,
0.7, 0.9}, 10 seeds. Hyperparameters (lr 0.05, momentum 0.9, expected batch
64) are those of dpsgd_baseline, not tuned for RS.
"""

from experiments.common import runner
from experiments.rs_tradeoff._claims import claims
from experiments.rs_tradeoff._config import Config
from experiments.rs_tradeoff._config import DESCRIPTION
from experiments.rs_tradeoff._config import NAME
from experiments.rs_tradeoff._report import report
from experiments.rs_tradeoff._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, run, claims, report)
