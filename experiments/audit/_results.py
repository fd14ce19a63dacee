"""audit's numbers (``_run.run``)."""

import dataclasses

from experiments.common import results
from experiments.common.results import Rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  cases: Rows  # per case: stated (eps, delta), honest and broken runs per seed
  registered: list[str]  # every case of dpjax.audit.audit_cases()
  one_run: Rows  # per (stated epsilon, canary kind): the one-run audits
  devices: str  # the JAX devices that ran
