"""Reconstruction error vs sparsification rate (Zhu & Blaschko, Thm 5.1, Fig. 5).

(a) Closed form (Thm 5.1): a one-input linear layer with gradient g = k x is
released as m * (k x + N(0, sigma^2 I)); the least-squares attacker's error
E||x - x_hat||^2 is compared with the bound sigma^2 / ((1 - r) ||k||^2).
(b) Inverting gradients (Geiping et al. 2020, the paper's Fig. 5 attack):
digits images are reconstructed from the noisy, sparsified gradient of a
sigmoid MLP at initialization (label known), by cosine gradient matching on
the visible coordinates. The claim: reconstruction gets worse as r grows
(``_claims``).

Seeds: seed s draws its own layer k, masks, noise (a), and its own MLP
initialization, test images, masks, noise and attack start (b). Within a
seed every rate reuses the same keys (common random numbers; the masks of
one key are nested as r grows), so the rates are compared paired by seed.
All seeds, images and settings of (b) run as one vmapped, jitted program.
Presets: ``_config.Config``.
"""

from experiments.common import runner
from experiments.rs_attack._claims import claims
from experiments.rs_attack._config import Config
from experiments.rs_attack._config import DESCRIPTION
from experiments.rs_attack._config import NAME
from experiments.rs_attack._report import report
from experiments.rs_attack._results import Results
from experiments.rs_attack._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
