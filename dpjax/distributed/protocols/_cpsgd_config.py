"""cpSGD's static parameters and its communication cost.

``CpsgdConfig`` holds the protocol's hyperparameters (Agarwal et al. 2018,
Sec. 4.2: D, k, m, p, X_max and the rotation switch) and validates them when
it is built; it is a frozen dataclass, hence hashable, so jitted functions
take it as a static argument. ``rotated_linf_clip`` is the X_max that the
randomized rotation allows (Thm. 4). ``bits_per_coordinate`` and
``cpsgd_bits`` count what a client sends.
"""

import dataclasses
import math
import numbers

from dpjax import _validate
from dpjax import noise
from dpjax.compression import GridQuantizer
from dpjax.compression import k_level_quantizer
from dpjax.compression import next_power_of_two
from dpjax.distributed.protocols._inputs import check_int
from dpjax.distributed.protocols._inputs import check_positive_finite


@dataclasses.dataclass(frozen=True, kw_only=True)
class CpsgdConfig:
  """Static parameters of the cpSGD protocol, validated at construction.

  ``linf_clip`` (X_max, the quantizer's per-coordinate clamp) defaults to
  ``l2_norm_clip`` without rotation: no coordinate of a clipped vector
  exceeds D, so the quantizer never clamps and the estimate is unbiased
  (paper Thm. 3). With ``rotate=True`` it must be given; the paper's choice
  is ``rotated_linf_clip(l2_norm_clip, dimension, num_clients, delta)``
  (Thm. 4: bias only on the probability-delta event that a rotated
  coordinate is clamped).

  Frozen and hashable: pass it to jitted functions as a static argument, and
  derive variants with ``dataclasses.replace`` (which validates again).

  Attributes:
    l2_norm_clip: D > 0, the L2 norm each client's vector is clipped to.
    levels: k >= 2, the number of quantization levels.
    trials: m >= 1, the number of Binomial trials each client adds per
      coordinate.
    p: the Binomial success probability in (0, 1) as given (default 1/2);
      the sampler uses ``binomial_p`` (p rounded to a multiple of 2^-32,
      exact for p = 1/2), and so does the server's debiasing.
    linf_clip: X_max > 0, the quantizer's range [-X_max, X_max] (default:
      see above).
    rotate: whether clients apply the shared randomized Hadamard rotation.

  Raises:
    ValueError: naming the offending value.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Sec. 4.2 (k, m, p, X_max), Thm. 3-4.

  Example:
    >>> cfg = CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=64)
    >>> cfg.linf_clip, cfg.spacing, cfg.max_message
    (1.0, 0.13333333333333333, 79)
    >>> rot = CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=64, rotate=True,
    ...                   linf_clip=rotated_linf_clip(1.0, 1000, 100, 1e-5))
    >>> round(rot.linf_clip, 4), rot.message_length(1000)
    (0.2153, 1024)
  """
  l2_norm_clip: float
  levels: int
  trials: int
  p: float = 0.5
  linf_clip: float | None = None
  rotate: bool = False

  def __post_init__(self):
    l2_norm_clip = check_positive_finite('l2_norm_clip', self.l2_norm_clip)
    levels = check_int('levels', self.levels, 2)
    trials = check_int('trials', self.trials, 1)
    p = self.p
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
      raise ValueError(f'Expected p={p!r} to be a number in (0, 1).')
    if not 0 < float(p) < 1:
      raise ValueError(f'Expected p={p} in (0, 1).')
    if not 0 < noise.binomial_p(p) < 1:
      raise ValueError(
          f'Expected p={p} to be at least 2^-33 away from 0 and 1.')
    if not isinstance(self.rotate, bool):
      raise ValueError(f'Expected rotate={self.rotate!r} to be a bool.')
    if levels - 1 + trials >= 2**31:
      raise ValueError(f'Expected levels + trials - 1 = '
                       f'{levels - 1 + trials} < 2^31 (int32 messages).')
    linf_clip = self.linf_clip
    if linf_clip is None:
      if self.rotate:
        raise ValueError(
            'Expected linf_clip with rotate=True, e.g. linf_clip='
            'rotated_linf_clip(l2_norm_clip, dimension, num_clients, delta).')
      linf_clip = l2_norm_clip
    linf_clip = check_positive_finite('linf_clip', linf_clip)
    for name, value in (('l2_norm_clip', l2_norm_clip), ('levels', levels),
                        ('trials', trials), ('p', float(p)),
                        ('linf_clip', linf_clip)):
      object.__setattr__(self, name, value)

  @property
  def quantizer(self) -> GridQuantizer:
    """The k-level quantizer on [-X_max, X_max] (codes 0..k-1)."""
    return k_level_quantizer(self.linf_clip, self.levels)

  @property
  def spacing(self) -> float:
    """Bin width s = 2 X_max / (k - 1)."""
    return self.quantizer.spacing

  @property
  def binomial_p(self) -> float:
    """The exact success probability the Binomial sampler uses (as a float)."""
    return float(noise.binomial_p(self.p))

  @property
  def max_message(self) -> int:
    """Largest message value k - 1 + m (messages lie in {0..k-1+m})."""
    return self.levels - 1 + self.trials

  def message_length(self, dimension: int) -> int:
    """Coordinates one client sends: d, or the padded d' when rotating.

    Example:
      >>> CpsgdConfig(l2_norm_clip=1.0, levels=4, trials=8, linf_clip=0.5,
      ...             rotate=True).message_length(100)
      128
    """
    dimension = check_int('dimension', dimension, 1)
    return next_power_of_two(dimension) if self.rotate else dimension


def rotated_linf_clip(l2_norm_clip: float, dimension: int, num_clients: int,
                      delta: float) -> float:
  """X_max that keeps all rotated coordinates in range w.p. >= 1 - delta.

  After the randomized Hadamard rotation (padded length d' =
  ``next_power_of_two(dimension)``), each rotated coordinate of a vector of
  norm <= D is sub-Gaussian with variance proxy D^2 / d', so by Hoeffding and
  a union bound over the n d' coordinates of all clients,
  X_max = D sqrt(2 ln(2 n d' / delta) / d') clips none of them with
  probability >= 1 - delta. Because no coordinate can exceed D, the result is
  capped at D (for small d' the formula exceeds D, and D is then exact).

  Args:
    l2_norm_clip: D > 0.
    dimension: d, the unpadded vector length (>= 1).
    num_clients: n >= 1.
    delta: failure probability in (0, 1).

  Returns:
    min(D, D sqrt(2 ln(2 n d' / delta) / d')), for ``CpsgdConfig``'s
    ``linf_clip``.

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 4 (the constant is derived
    here, not taken from the paper).

  Example:
    >>> round(rotated_linf_clip(1.0, 1000, 100, 1e-5), 4)
    0.2153
  """
  l2_norm_clip = check_positive_finite('l2_norm_clip', l2_norm_clip)
  dimension = check_int('dimension', dimension, 1)
  num_clients = check_int('num_clients', num_clients, 1)
  _validate.open_unit(delta=delta)
  dp = next_power_of_two(dimension)
  bound = l2_norm_clip * math.sqrt(2 * math.log(2 * num_clients * dp / delta)
                                   / dp)
  return min(l2_norm_clip, bound)


# --- Communication -----------------------------------------------------------


def bits_per_coordinate(levels: int, trials: int, *,
                        fixed_width: bool = False) -> float | int:
  """Bits to send one cpSGD message coordinate in {0, ..., k - 1 + m}.

  The paper's count (Thm. 3-4) is the exact log2(k + m) (reachable with
  entropy/arithmetic coding of a block of coordinates); a fixed-width
  encoding of each coordinate needs ceil(log2(k + m)) bits.

  Args:
    levels: k >= 2.
    trials: m >= 1.
    fixed_width: return the integer ceil(log2(k + m)) instead.

  Returns:
    log2(k + m) as a float, or its ceiling as an int.

  Example:
    >>> bits_per_coordinate(16, 64), bits_per_coordinate(16, 50,
    ...                                                  fixed_width=True)
    (6.321928094887363, 7)
  """
  levels = check_int('levels', levels, 2)
  trials = check_int('trials', trials, 1)
  if fixed_width:
    return (levels + trials - 1).bit_length()  # ceil(log2(k + m))
  return math.log2(levels + trials)


def cpsgd_bits(config: CpsgdConfig, dimension: int, *,
               fixed_width: bool = False) -> float | int:
  """Bits one client sends per cpSGD round, for vectors of length d.

  ``config.message_length(d)`` coordinates (d, or d' padded to a power of
  two when rotating) times ``bits_per_coordinate(k, m)``. Excludes the O(1)
  header of the paper's count (and the log2(n) extra bits per coordinate
  that a secure-aggregation modulus would add).

  Args:
    config: a ``CpsgdConfig``.
    dimension: d >= 1, the length of each client's vector.
    fixed_width: count ceil(log2(k + m)) bits per coordinate.

  Returns:
    Bits per client per round (a float, or an int with ``fixed_width``).

  References:
    Agarwal et al., cpSGD, NeurIPS 2018, Thm. 3-4 (communication).

  Example:
    >>> cpsgd_bits(CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=16), 10)
    50.0
  """
  return config.message_length(dimension) * bits_per_coordinate(
      config.levels, config.trials, fixed_width=fixed_width)
