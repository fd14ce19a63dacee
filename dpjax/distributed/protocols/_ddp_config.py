"""Static parameters of the DDG and Skellam protocols, their events and bits.

``DistributedDpConfig`` holds what both protocols share (clip c, bits b,
scale gamma, central noise stddev, n clients, conditional-rounding beta and
retries) and the mechanism name; ``distributed_dp_event`` is the
privacy companion, ``distributed_dp_bits`` the communication count.
"""

import dataclasses
import math

from dpjax import accounting
from dpjax._composition import repeated
from dpjax import noise
from dpjax.compression import next_power_of_two
from dpjax.distributed.protocols._inputs import check_int
from dpjax.distributed.protocols._inputs import check_positive_finite

MECHANISMS = ('ddg', 'skellam')
DEFAULT_BETA = math.exp(-0.5)
_MAX_CODE = 2.0**30  # randomized_round's bound: codes plus noise fit int32


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistributedDpConfig:
  """Distributed discrete Gaussian (DDG) or Skellam protocol, validated.

  A client's vector is clipped to L2 norm c, padded to d' (a power of two),
  rotated (randomized Hadamard, shared key), scaled by 1/gamma, rounded
  conditionally onto Z^d' (norm bound ``norm_bound(d)``), noised, and
  reduced modulo M = 2^b. The noise of the *sum* has standard deviation
  ``stddev`` in real units (``stddev / gamma`` on the integer grid): each
  client adds N_Z(0, sigma^2) with sigma = stddev / (gamma sqrt(n)) (DDG), or
  Sk(mu) with mu = (stddev / gamma)^2 / (2 n) (Skellam).

  Frozen and hashable: jitted functions take it as a static argument.

  Attributes:
    mechanism: ``'ddg'`` or ``'skellam'``.
    l2_norm_clip: c > 0.
    bits: b in [2, 32], bits per coordinate of every message and of the sum.
    gamma: the grid step gamma > 0 (real units per integer).
    stddev: central noise stddev of the sum, real units (>= 0; 0: no noise,
      for tests).
    num_clients: n >= 1, the clients whose noise shares make up the sum.
    beta: conditional rounding parameter in [0, 1) (default exp(-1/2), the
      papers' choice); 0 gives the unconditional bound c/gamma + sqrt(d').
    max_rounding_attempts: R >= 1 rounding draws per client; a client whose
      R draws all exceed the bound sends the zero vector (its noise still
      goes in), which keeps the bound, hence the privacy guarantee, always
      true. Each draw exceeds the bound with probability <= beta, so this
      happens with probability <= beta^R (e^-32 ~ 1.3e-14 per client at
      the defaults).

  Raises:
    ValueError: naming the offending value.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Alg. 1-2 and Sec. 4; Agarwal, Kairouz,
    Liu, NeurIPS 2021, Alg. 1.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=16,
    ...                           gamma=1e-3, stddev=0.5, num_clients=100)
    >>> round(cfg.local_sigma, 3), cfg.modulus
    (50.0, 65536)
  """
  mechanism: str
  l2_norm_clip: float
  bits: int
  gamma: float
  stddev: float
  num_clients: int
  beta: float = DEFAULT_BETA
  max_rounding_attempts: int = 64

  def __post_init__(self):
    if self.mechanism not in MECHANISMS:
      raise ValueError(f'Expected mechanism={self.mechanism!r} in '
                       f'{MECHANISMS}.')
    c = check_positive_finite('l2_norm_clip', self.l2_norm_clip)
    bits = check_int('bits', self.bits, 2)
    if bits > 32:
      raise ValueError(f'Expected bits={bits} <= 32.')
    gamma = check_positive_finite('gamma', self.gamma)
    stddev = self.stddev
    if isinstance(stddev, bool) or not isinstance(stddev, (int, float)):
      raise ValueError(f'Expected stddev={stddev!r} to be a number >= 0.')
    stddev = float(stddev)
    if not (stddev >= 0 and math.isfinite(stddev)):
      raise ValueError(f'Expected stddev={stddev} >= 0 and finite.')
    n = check_int('num_clients', self.num_clients, 1)
    beta = self.beta
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (
        0 <= beta < 1):
      raise ValueError(f'Expected beta={beta!r} in [0, 1).')
    attempts = check_int('max_rounding_attempts', self.max_rounding_attempts,
                         1)
    for name, value in (('l2_norm_clip', c), ('bits', bits),
                        ('gamma', gamma), ('stddev', stddev),
                        ('num_clients', n), ('beta', float(beta)),
                        ('max_rounding_attempts', attempts)):
      object.__setattr__(self, name, value)
    if self.mechanism == 'ddg' and stddev > 0:
      sigma = self.local_sigma
      if not 2.0**-10 <= sigma <= noise.MAX_DISCRETE_SIGMA:
        raise ValueError(
            f'Expected the local discrete Gaussian sigma = stddev / (gamma '
            f'sqrt(n)) = {sigma:.6g} in [2^-10, 2^21] (stddev={stddev}, '
            f'gamma={gamma}, num_clients={n}).')
    if c / gamma + 64 * self.local_noise_stddev >= _MAX_CODE:
      raise ValueError(
          f'Expected l2_norm_clip / gamma = {c / gamma:.6g} (plus the noise) '
          f'< 2^30 so that codes fit int32; increase gamma={gamma}.')

  @property
  def modulus(self) -> int:
    """M = 2^b."""
    return 2**self.bits

  @property
  def local_noise_stddev(self) -> float:
    """Each client's noise stddev on the integer grid: stddev/(gamma sqrt n)."""
    return self.stddev / (self.gamma * math.sqrt(self.num_clients))

  @property
  def local_sigma(self) -> float:
    """DDG: each client's N_Z(0, sigma^2) parameter (integer units)."""
    return self.local_noise_stddev

  @property
  def local_mu(self) -> float:
    """Skellam: each client's Sk(mu) parameter, mu = local variance / 2."""
    return self.local_noise_stddev**2 / 2

  def message_length(self, dimension: int) -> int:
    """d' = the next power of two >= d (the rotation pads)."""
    return next_power_of_two(check_int('dimension', dimension, 1))

  def norm_bound(self, dimension: int) -> float:
    """The conditional rounding bound on ||round(R x / gamma)||_2."""
    return accounting.rounded_l2_norm_bound(
        self.l2_norm_clip / self.gamma, self.message_length(dimension),
        self.beta)


def check_config(config) -> None:
  if not isinstance(config, DistributedDpConfig):
    raise ValueError(f'Expected config to be a DistributedDpConfig, got '
                     f'{type(config).__name__}.')


def distributed_dp_event(config: DistributedDpConfig, dimension: int, *,
                         sampling_rate: float = 1.0, replace_one: bool = False,
                         steps: int = 1):
  """The DpEvent of ``steps`` rounds, for an observer of the modular sum only.

  Sensitivities on the integer grid, d' = ``config.message_length(d)``:
  Delta_2 = B = ``config.norm_bound(d)`` (the conditional rounding bound;
  every client's rounded vector obeys it, see ``max_rounding_attempts``),
  Delta_1 = B min(sqrt(d'), B), both doubled for replace-one neighbours.
  The default neighbour relation is add/remove-one client in the sense of
  the papers: one client's vector is replaced by zero while all n clients
  still add their noise shares. DDG: ``accounting.ddg_event`` with the
  requested local sigma (the exact sampler's sigma' is never smaller, and
  tau falls with sigma, so this is conservative). Skellam:
  ``accounting.skellam_event`` with total variance 2 n mu.

  Args:
    config: the protocol.
    dimension: d >= 1.
    sampling_rate: Poisson client sampling rate q in (0, 1] (q < 1 needs
      add/remove-one neighbours).
    replace_one: double the sensitivities (replace-one client).
    steps: rounds (default 1).

  Returns:
    A DpEvent the RDP accountant composes (``accounting.epsilon``,
    ``PrivacyLedger``): one round's, self-composed ``steps`` times when
    steps > 1.

  Raises:
    ValueError: bad input, ``stddev == 0`` (no privacy), or q < 1 with
      ``replace_one``.

  Privacy:
    Assumes secure aggregation: the server sees only the sum modulo M.
    Modular reduction and decoding are post-processing.

  References:
    Kairouz, Liu, Steinke, ICML 2021, Thm. 1, Prop. 14; Agarwal, Kairouz,
    Liu, NeurIPS 2021, Sec. 3.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='skellam', l2_norm_clip=1.0,
    ...                           bits=16, gamma=1e-3, stddev=2.0,
    ...                           num_clients=100)
    >>> ev = distributed_dp_event(cfg, 1000)
    >>> round(accounting.epsilon(ev, 1e-5), 2)
    2.17
  """
  check_config(config)
  if config.stddev == 0:
    raise ValueError('Expected stddev > 0 for a private round, got 0.')
  if not isinstance(replace_one, bool):
    raise ValueError(f'Expected replace_one={replace_one!r} to be a bool.')
  if replace_one and sampling_rate != 1:
    raise ValueError(f'Expected sampling_rate={sampling_rate} = 1 with '
                     'replace_one=True (subsampling is accounted under '
                     'add/remove-one).')
  dprime = config.message_length(dimension)
  l2 = config.norm_bound(dimension)
  l1 = accounting.rounded_l1_norm_bound(l2, dprime)
  if replace_one:
    l2, l1 = 2 * l2, 2 * l1
  if config.mechanism == 'ddg':
    return repeated(accounting.ddg_event(
        config.local_sigma, config.num_clients, l2, l1, dprime,
        sampling_rate), steps)
  variance = config.num_clients * 2 * config.local_mu
  return repeated(accounting.skellam_event(variance, l2, l1, sampling_rate),
                  steps)


def distributed_dp_bits(config: DistributedDpConfig, dimension: int) -> int:
  """Bits one client sends per round: b per coordinate of the padded d'.

  Example:
    >>> cfg = DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0, bits=16,
    ...                           gamma=1e-3, stddev=0.5, num_clients=100)
    >>> distributed_dp_bits(cfg, 1000)
    16384
  """
  check_config(config)
  return config.bits * config.message_length(dimension)
