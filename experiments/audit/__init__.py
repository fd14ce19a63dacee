"""Empirical privacy audits of every dpjax mechanism.

Each case of ``dpjax.audit.audit_cases()`` (a mechanism, a worst-case pair
of neighbouring inputs, a score, the stated (eps, delta)) is attacked by
``dpjax.audit.distinguishing_audit`` on every seed: the table gives the 95%
Clopper-Pearson lower bound on epsilon, its spread over seeds, the ratio
lower / stated, and the same for the case's deliberately broken twin, which
the audit must catch. The one-run audit of DP-SGD training (Steinke, Nasr &
Jagielski 2023) adds a row when the library has it. No data: the inputs are
canaries built for each mechanism.

Presets: ``_config.Config``. Claims: ``_claims``.
"""

from experiments.audit._claims import claims
from experiments.audit._config import Config
from experiments.audit._config import DESCRIPTION
from experiments.audit._config import NAME
from experiments.audit._report import report
from experiments.audit._results import Results
from experiments.audit._run import run
from experiments.common import runner

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
