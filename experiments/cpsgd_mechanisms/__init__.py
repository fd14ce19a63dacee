"""Error vs epsilon of the Gaussian and Binomial mechanisms (cpSGD, Fig. 1).

Agarwal et al. (NeurIPS 2018), Sec. 2.2 and Fig. 1: release a d-dimensional
query whose neighbouring values differ by a vector of the lattice s Z^d with
L2 and L_inf norm at most 1 (so L1 at most sqrt(d)); for d = 1 all three
sensitivities are 1, as in Theorem 1's test vector. For every target
(epsilon, delta):

* Binomial mechanism, scale s = 1/j: the smallest integer N such that
  Theorem 1 holds (N p (1-p) >= max(23 ln(10 d / delta), 2 Delta_inf / s))
  and ``binomial_epsilon(N, p, s, delta, d, ...) <= epsilon``
  (``accounting.calibrate`` on its ``EpsilonDeltaDpEvent``, an integer
  search from ``binomial_min_trials``); its error is s^2 N p (1-p) per
  coordinate (d times that in all).
* Gaussian mechanism: sigma^2 per coordinate, sigma calibrated (a) by the
  classical bound sigma = Delta_2 sqrt(2 ln(1.25/delta)) / epsilon
  (``accounting.classical_gaussian_stddev``, proved for epsilon <= 1 only, so
  shown there only) and (b) tightly, with
  ``accounting.calibrate`` on ``accounting.gaussian_event`` (under
  the PLD accountant, default neighbouring relation: sums at L2 distance
  <= Delta_2).

The paper's claim: as s shrinks (N p (1-p) grows at fixed error), the
Binomial curve approaches the Gaussian one. Two checks beyond the figure:

* Exact privacy (d = 1): the exact epsilon of the Binomial mechanism at the
  Theorem-1 N, from the hockey-stick divergence of Bin(N, p) and its shift by
  j = Delta / s lattice steps (``accounting.binomial_exact_epsilon``: both
  directions, all smaller shifts checked too), and the smallest N whose
  exact epsilon meets the target
  (``accounting.calibrate`` on the exact epsilon's event): how conservative
  Theorem 1 is.
* Sampling: at a few points, Bin(N, p) is sampled with
  ``dpjax.noise.binomial`` (every seed from its own key, the seeds vmapped)
  and the measured error is compared with s^2 N p (1-p).

The Binomial-vs-Gaussian and Theorem 1 comparisons are exact (calibrated
formulas against each other, no random draw): the report shows them as
exact checks that pass or fail. Only the sampling check is measured, so it
is the experiment's one claim under the seed rule (``_claims``): per seed,
the largest relative deviation over the sampled points must be below
``match_tolerance``. Presets: ``_config.Config``.
"""

from experiments.common import runner
from experiments.cpsgd_mechanisms._claims import claims
from experiments.cpsgd_mechanisms._config import Config
from experiments.cpsgd_mechanisms._config import DESCRIPTION
from experiments.cpsgd_mechanisms._config import NAME
from experiments.cpsgd_mechanisms._report import report
from experiments.cpsgd_mechanisms._results import Results
from experiments.cpsgd_mechanisms._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
