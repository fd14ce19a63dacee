"""The registered experiments, by name (``python -m experiments list``).

An experiment module defines ``NAME``, ``DESCRIPTION``, ``MODES`` (at least
'quick' and 'full'), ``config(mode, **overrides) -> dict``,
``run(config, out_dir, progress) -> results`` and
``report(results, out_dir) -> markdown``.
"""

from experiments import compgd
from experiments import compressive_regression
from experiments import cpsgd_dme
from experiments import cpsgd_mechanisms
from experiments import cpsgd_training
from experiments import distributed_dp
from experiments import dpsgd_baseline
from experiments import nonparametric
from experiments import qdpsgd
from experiments import rs_attack
from experiments import rs_privacy
from experiments import rs_tradeoff

EXPERIMENTS = {m.NAME: m for m in (dpsgd_baseline, rs_tradeoff, rs_privacy,
                                   rs_attack, compressive_regression,
                                   cpsgd_mechanisms, cpsgd_dme,
                                   cpsgd_training, distributed_dp, qdpsgd,
                                   compgd, nonparametric)}
