"""Privacy accounting on dp_accounting: events, epsilon, calibration, ledger.

Planning goes through two events, ``gaussian_event`` (every Gaussian
mechanism, DP-SGD's included) and ``pure_dp_event`` (every epsilon-DP
release), and one calibrator, ``calibrate``; a mechanism whose accounting
differs has its own event (``laplace_event``, ``discrete_gaussian_event``,
the distributed events).

Imports nothing from dpjax except the dependency-free ``dpjax._validate``
and ``dpjax._composition``.
"""

from dpjax.accounting._accountants import ACCOUNTANTS
from dpjax.accounting._accountants import calibrate
from dpjax.accounting._accountants import delta
from dpjax.accounting._accountants import epsilon
from dpjax.accounting._accountants import Epsilon
from dpjax.accounting._accountants import epsilon_from_rdp
from dpjax.accounting._accountants import make_accountant
from dpjax.accounting._accountants import rdp_curve
from dpjax.accounting._balls_in_bins import BALLS_IN_BINS_MAX_STEPS
from dpjax.accounting._balls_in_bins import balls_in_bins_event
from dpjax.accounting._balls_in_bins import balls_in_bins_rdp
from dpjax.accounting._balls_in_bins import BallsInBinsDpEvent
from dpjax.accounting._binomial import advanced_composition
from dpjax.accounting._binomial import binomial_epsilon
from dpjax.accounting._binomial import binomial_min_trials
from dpjax.accounting._binomial import cpsgd_sensitivities
from dpjax.accounting._binomial_exact import binomial_exact_delta
from dpjax.accounting._binomial_exact import binomial_exact_epsilon
from dpjax.accounting._distributed import ddg_event
from dpjax.accounting._distributed import ddg_rdp
from dpjax.accounting._distributed import ddg_tau
from dpjax.accounting._distributed import DistributedDiscreteGaussianDpEvent
from dpjax.accounting._distributed import rounded_l1_norm_bound
from dpjax.accounting._distributed import rounded_l2_norm_bound
from dpjax.accounting._distributed import skellam_event
from dpjax.accounting._distributed import skellam_rdp
from dpjax.accounting._distributed import SkellamDpEvent
from dpjax.accounting._distributed import subsampled_rdp
from dpjax.accounting._events import basic_composition
from dpjax.accounting._events import discrete_gaussian_event
from dpjax.accounting._events import EpsilonDeltaDpEvent
from dpjax.accounting._events import gaussian_event
from dpjax.accounting._events import laplace_event
from dpjax.accounting._events import poisson_truncation_probability
from dpjax.accounting._events import pure_dp_event
from dpjax.accounting._events import replace_one_event
from dpjax.accounting._events import TruncatedPoissonSampledDpEvent
from dpjax.accounting._extended_accountants import infer_neighboring_relation
from dpjax.accounting._gaussian import classical_gaussian_stddev
from dpjax.accounting._gaussian import gaussian_epsilon
from dpjax.accounting._gaussian import gaussian_protocol_epsilon
from dpjax.accounting._gaussian import gaussian_stddev
from dpjax.accounting._ledger import event_from_dict
from dpjax.accounting._ledger import event_to_dict
from dpjax.accounting._ledger import draws_noise
from dpjax.accounting._ledger import is_amplified
from dpjax.accounting._ledger import key_fingerprint
from dpjax.accounting._ledger import PrivacyLedger
from dpjax.accounting._step_event import privacy_states
from dpjax.accounting._step_event import step_event
from dpjax.accounting._tradeoff import gdp_mu
from dpjax.accounting._tradeoff import tradeoff_curve

__all__ = [
    'ACCOUNTANTS',
    'advanced_composition',
    'balls_in_bins_event',
    'BALLS_IN_BINS_MAX_STEPS',
    'balls_in_bins_rdp',
    'BallsInBinsDpEvent',
    'basic_composition',
    'binomial_epsilon',
    'binomial_exact_delta',
    'binomial_exact_epsilon',
    'binomial_min_trials',
    'calibrate',
    'classical_gaussian_stddev',
    'cpsgd_sensitivities',
    'ddg_event',
    'ddg_rdp',
    'ddg_tau',
    'delta',
    'discrete_gaussian_event',
    'DistributedDiscreteGaussianDpEvent',
    'draws_noise',
    'epsilon',
    'Epsilon',
    'epsilon_from_rdp',
    'EpsilonDeltaDpEvent',
    'event_from_dict',
    'event_to_dict',
    'gaussian_epsilon',
    'gaussian_event',
    'gaussian_protocol_epsilon',
    'gaussian_stddev',
    'gdp_mu',
    'infer_neighboring_relation',
    'is_amplified',
    'key_fingerprint',
    'laplace_event',
    'make_accountant',
    'poisson_truncation_probability',
    'privacy_states',
    'PrivacyLedger',
    'pure_dp_event',
    'rdp_curve',
    'replace_one_event',
    'rounded_l1_norm_bound',
    'rounded_l2_norm_bound',
    'skellam_event',
    'skellam_rdp',
    'SkellamDpEvent',
    'step_event',
    'subsampled_rdp',
    'tradeoff_curve',
    'TruncatedPoissonSampledDpEvent',
]
