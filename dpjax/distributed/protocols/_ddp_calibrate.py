"""Choosing gamma and the noise of the DDG and Skellam protocols.

Given (epsilon, delta, rounds, n, d, b), the noise is the smallest central
stddev whose composed RDP epsilon meets the target at the given gamma, and
gamma is where k standard deviations of the aggregate fill the modulus, as in
the papers (DDG Sec. 4.4 and Thm. 34 / eq. (61) of arXiv 2102.06387, k = 4;
Skellam Sec. 4, k = 3): 2^b = 2 k sqrt(c^2 n^2 / d' + n gamma^2 / 4 +
stddev(gamma)^2) / gamma (the first term is c^2 n / d' with
``sqrtn_norm_growth``: ||sum_i x_i|| <= sqrt(n) c instead of n c).

Against google-research/federated ``distributed_dp/accounting_utils.py``
(``ddgauss_params``, ``skellam_params``) the RDP bounds, tau, rounding
bound and gamma equation are the same; gamma and the noise agree to within
0.1% on its mean-estimation settings, plus up to ~0.3% less noise where
the optimal RDP order lies between integers. The reference solves both
equations for equality with ``minimize_scalar`` (its epsilon can end a
hair above the target) over integer orders 2..128, 256; here both are
bisected and rounded up (epsilon <= target, k stddevs fit) and the orders
are the RDP accountant's, which include fractional ones.
"""

import math

import dp_accounting

from dpjax import _solve
from dpjax import _validate
from dpjax import accounting
from dpjax.distributed.protocols._inputs import check_int
from dpjax.distributed.protocols._ddp_config import DEFAULT_BETA
from dpjax.distributed.protocols._ddp_config import distributed_dp_event
from dpjax.distributed.protocols._ddp_config import DistributedDpConfig
from dpjax.distributed.protocols._ddp_config import MECHANISMS

_RTOL = 1e-3
_K_STDDEVS = {'ddg': 4.0, 'skellam': 3.0}


def _config(mechanism, gamma, stddev, s):
  return DistributedDpConfig(
      mechanism=mechanism, l2_norm_clip=s['l2_norm_clip'], bits=s['bits'],
      gamma=gamma, stddev=stddev, num_clients=s['num_clients'],
      beta=s['beta'])


def _epsilon(mechanism, gamma, stddev, s) -> float:
  try:
    cfg = _config(mechanism, gamma, stddev, s)
  except ValueError:
    return math.inf
  ev = distributed_dp_event(cfg, s['dimension'],
                            sampling_rate=s['sampling_rate'],
                            replace_one=s['replace_one'])
  return accounting.epsilon(dp_accounting.SelfComposedDpEvent(
      ev, s['rounds']), s['delta'], 'rdp')


def _stddev(mechanism, gamma, s) -> float:
  """Smallest central stddev (within ``_RTOL``) meeting the target."""
  target, c = s['epsilon'], s['l2_norm_clip']

  def unreachable(hi):
    raise ValueError(f'epsilon={target} is unreachable with stddev <= '
                     f'{hi:g} at gamma={gamma:g}.')

  return _solve.smallest_float(
      lambda stddev: _epsilon(mechanism, gamma, stddev, s) <= target,
      start=c, rtol=_RTOL, ceiling=1e6 * c, unreachable=unreachable)


def _excess(mechanism, gamma, s, k) -> tuple[float, float]:
  """(2 k sqrt(var) / gamma - 2^b, stddev) at gamma."""
  n, c = s['num_clients'], s['l2_norm_clip']
  dprime = 2**max(0, (s['dimension'] - 1).bit_length())
  stddev = _stddev(mechanism, gamma, s)
  signal = c**2 * (n if s['sqrtn_norm_growth'] else n**2) / dprime
  var = signal + n * gamma**2 / 4 + stddev**2
  return 2 * k * math.sqrt(var) / gamma - 2.0**s['bits'], stddev


def calibrate_distributed_dp(mechanism: str, *, epsilon: float, delta: float,
                             num_clients: int, dimension: int, bits: int,
                             l2_norm_clip: float, rounds: int = 1,
                             sampling_rate: float = 1.0,
                             beta: float = DEFAULT_BETA,
                             k_stddevs: float | None = None,
                             replace_one: bool = False,
                             sqrtn_norm_growth: bool = False
                             ) -> DistributedDpConfig:
  """A DDG or Skellam configuration meeting (epsilon, delta) over ``rounds``.

  Bisects (in log gamma) for the gamma at which k standard deviations of the
  aggregate (signal, rounding and noise) span the modulus 2^b, calibrating
  the noise at every gamma tried (smallest stddev with the composed RDP
  epsilon <= target, relative tolerance 1e-3, rounded up).

  Args:
    mechanism: ``'ddg'`` or ``'skellam'``.
    epsilon: target epsilon > 0 over all rounds.
    delta: in (0, 1).
    num_clients: n >= 1 clients per round.
    dimension: d >= 1.
    bits: b in [2, 32].
    l2_norm_clip: c > 0.
    rounds: rounds composed (>= 1).
    sampling_rate: Poisson client sampling rate q in (0, 1].
    beta: conditional rounding parameter in [0, 1).
    k_stddevs: k (default 4 for DDG, 3 for Skellam, the reference code's).
    replace_one: replace-one neighbours (doubled sensitivities).
    sqrtn_norm_growth: assume ||sum_i x_i|| <= sqrt(n) c (default n c).

  Returns:
    ``DistributedDpConfig`` whose ``distributed_dp_event`` composed
    ``rounds`` times has epsilon <= target at delta.

  Raises:
    ValueError: bad input (naming it), or b too small for n and k.

  Privacy:
    The returned configuration's companion is ``distributed_dp_event``.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Sec. 4.4; Agarwal, Kairouz, Liu,
    NeurIPS 2021, Sec. 4; google-research/federated ``distributed_dp``
    (``ddgauss_params``, ``skellam_params``).

  Example:
    >>> cfg = calibrate_distributed_dp('ddg', epsilon=1.0, delta=1e-5,
    ...                                num_clients=100, dimension=1000,
    ...                                bits=16, l2_norm_clip=1.0)
    >>> ev = distributed_dp_event(cfg, 1000)
    >>> accounting.epsilon(ev, 1e-5) <= 1.0
    True
  """
  if mechanism not in MECHANISMS:
    raise ValueError(f'Expected mechanism={mechanism!r} in {MECHANISMS}.')
  _validate.positive(epsilon=epsilon, l2_norm_clip=l2_norm_clip)
  _validate.open_unit(delta=delta)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  n = check_int('num_clients', num_clients, 1)
  d = check_int('dimension', dimension, 1)
  b = check_int('bits', bits, 2)
  if b > 32:
    raise ValueError(f'Expected bits={b} <= 32.')
  rounds = check_int('rounds', rounds, 1)
  if not 0 <= beta < 1:
    raise ValueError(f'Expected beta={beta} in [0, 1).')
  k = _K_STDDEVS[mechanism] if k_stddevs is None else float(k_stddevs)
  _validate.positive(k_stddevs=k)
  if 4.0**b <= n * k**2:
    raise ValueError(f'Expected 2^(2 bits) > n k^2: bits={b} is too small '
                     f'for num_clients={n} and k_stddevs={k}.')
  s = dict(epsilon=float(epsilon), delta=float(delta), num_clients=n,
           dimension=d, bits=b, l2_norm_clip=float(l2_norm_clip),
           rounds=rounds, sampling_rate=float(sampling_rate),
           beta=float(beta), replace_one=bool(replace_one),
           sqrtn_norm_growth=bool(sqrtn_norm_growth))
  # Start where the rounding does not inflate the sensitivity (tiny gamma).
  c = s['l2_norm_clip']
  _, stddev0 = _excess(mechanism, c * 2.0**-14, s, k)
  dprime = 2**max(0, (d - 1).bit_length())
  signal = c**2 * (n if sqrtn_norm_growth else n**2) / dprime
  gamma = math.sqrt((signal + stddev0**2) / (4.0**b / (4 * k**2) - n / 4))

  def unreachable(_):
    raise ValueError(f'bits={b} cannot hold the aggregate of n={n} clients '
                     f'at epsilon={epsilon}: no gamma fits.')

  hi = _solve.smallest_float(
      lambda g: _excess(mechanism, g, s, k)[0] <= 0, start=gamma,
      rtol=_RTOL, ceiling=2**20 * gamma, tight=False, unreachable=unreachable)
  return _config(mechanism, hi, _excess(mechanism, hi, s, k)[1], s)
