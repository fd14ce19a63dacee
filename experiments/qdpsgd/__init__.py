"""Decentralized DP-SGD on a gossip graph (Ding et al., AAAI 2021).

n agents, each with its own shard of the training records (MNIST-5k by
default) and a copy of the paper's 784-50-10 sigmoid MLP, run Q-DPSGD-1
(quantized gossip, Gaussian noise on the gradient), Q-DPSGD-2 (discrete
Gaussian noise on the quantized broadcast, also at more bits), DSGD (full
precision, non-private) and SDM (sparsified differentials, Gaussian noise)
with ``dpjax.distributed``, at the paper's step sizes for T rounds (T with a
mixing rate of at most 1). Q-DPSGD uses deadline minibatches; the baselines
wait for a fixed batch. DSGD and Q-DPSGD-1 with sigma = 0 are the noise-free
sanity rows; noise is calibrated to each target epsilon (the paper's and a
sweep) with the sound per-agent accounting, and the paper's Theorems 1 and 5
calibration runs beside it, labelled by what it really spends. Outputs: loss
vs rounds and vs simulated time (Figs. 1-3), accuracy vs epsilon, the privacy
table and the claim verdicts (``_claims``). See ``_run`` for the protocol of
a run; presets: ``_config.Config``; the setup: docs/qdpsgd/qdpsgd.md.
"""

from experiments.common import runner
from experiments.qdpsgd._claims import claims
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import DESCRIPTION
from experiments.qdpsgd._config import NAME
from experiments.qdpsgd._report import report
from experiments.qdpsgd._results import Results
from experiments.qdpsgd._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
