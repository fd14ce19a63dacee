"""Decentralized DP-SGD on a gossip graph (Ding et al., AAAI 2021).

n agents, each with its own shard of the training records and a copy of a
one-hidden-layer sigmoid MLP, run Q-DPSGD-1 (quantized gossip, Gaussian
noise on the gradient), Q-DPSGD-2 (discrete Gaussian noise on the quantized
broadcast), DSGD (full precision, non-private) and SDM (sparsified
differentials, Gaussian noise) with ``dpjax.distributed``. Q-DPSGD uses
deadline minibatches; the baselines wait for a fixed batch. Noise is
calibrated to each target epsilon with the sound per-agent accounting (the
paper's Theorems 1 and 5 are reported beside it). Outputs: loss vs rounds and
vs simulated time (Figs. 1-3), the privacy table and the claim verdicts
(``_claims``). See ``_run`` for the protocol of a run; presets:
``_config.Config``.
"""

from experiments.common import runner
from experiments.qdpsgd._claims import claims
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import DESCRIPTION
from experiments.qdpsgd._config import NAME
from experiments.qdpsgd._report import report
from experiments.qdpsgd._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, run, claims, report)
