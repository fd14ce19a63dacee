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
(``_claims``). See ``_run`` for the protocol of a run.
"""

import time
from typing import Any

from experiments.common import report as report_lib
from experiments.qdpsgd import _claims
from experiments.qdpsgd import _run
from experiments.qdpsgd._config import config
from experiments.qdpsgd._config import DESCRIPTION
from experiments.qdpsgd._config import MODES
from experiments.qdpsgd._config import NAME
from experiments.qdpsgd._report import report

__all__ = ['config', 'DESCRIPTION', 'MODES', 'NAME', 'report', 'run']


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  del out_dir
  start = time.time()
  ds = _run.load_data(cfg)
  the_plan = _claims.plan(cfg)  # fixed before any training
  scenarios = []
  for n in cfg['agents']:
    for batch in cfg['batch_sizes']:
      scenarios.append(_run.run_scenario(cfg, ds, n, batch, progress))
  return dict(experiment=NAME, config=cfg,
              dataset=report_lib.dataset_info(ds), scenarios=scenarios,
              plan=the_plan, claims=_claims.claims(the_plan, scenarios[0]),
              wall_seconds=round(time.time() - start, 1))
