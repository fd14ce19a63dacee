"""The clipped sum as a typed value that carries its bound and its unit.

DP-SGD's noise is calibrated to the bound C of one record's contribution to
the sum it perturbs (Abadi et al. 2016, Alg. 1). A bare pytree cannot say
whether it was clipped, to which C, or whether the record is an example or
a user, so a step could be recorded at sigma for a sum that moves by 8 C.
``ClippedSum`` binds the value to its bound and its unit: dpjax's clipping
functions (``clip_and_sum``, ``clipped_grad_sum`` vmap or ghost,
``sharded_clipped_grad_sum``, ``clipped_user_grad_sum``, the
``clip_per_example`` transform) return one, and the noise transforms take
only a ``ClippedSum`` and calibrate their noise to the bound it carries: the
bound is given once, to the clipping.

The bound follows the arithmetic by public numbers. It is a pytree leaf
beside the value, so ``jax.tree.map``, ``optax.scale`` and
``optax.tree_utils`` apply to it what they apply to the value: scaling the
sum by a Python number a scales the bound by |a|, adding two clipped sums
adds their bounds (the triangle inequality: one record moves each sum by at
most its bound). ``a * s`` and ``s1 + s2`` do the same on the object (and
add sums of different bounds, which ``jax.tree.map`` cannot pair). Any other map leaves no valid bound, and the sum stops
being a clipped sum, which the noise refuses (at once when the values are
concrete, else at recording, through the flag its state keeps):

* a map that is not linear (sign, square, clip, an added constant): a
  second leaf, the probe, starts at -2 C, and scaling and adding keep probe
  = -2 bound exactly in floating point (multiplying by 2 is exact);
* arithmetic by an array, traced or not, on a sum clipped to a concrete C:
  such a scale may depend on the data (S / ||S|| moves by up to 2, whatever
  C), so a bound that is no longer a Python number must still equal C (as
  after a ``jit`` boundary, which turns the leaf into an array);
* a map that changes a leaf's shape (a reduction).

A sum clipped to a traced bound (adaptive clipping, a sweep over C) has no
concrete C to compare with: there only the probe checks the map, and a
data-dependent scale is not detected. Nor is a map that treats the leaves
differently (by shape, position or value range) and leaves the bound's
leaves alone: the bound follows maps that do the same arithmetic to every
leaf. The unit, C and the leaves' shapes are static. A ``jit`` boundary
keeps the bound; a sum scaled by ``jax.tree.map`` before crossing one is
refused (its array bound no longer equals C), ``k * s`` is not.

There is deliberately no public constructor from a bare value: wrap your own
per-example gradients with ``clip_and_sum``. A sum with no per-record
clipping behind it has no bound dpjax can check; noise it with
``add_gaussian_noise`` and state its sensitivity in the event yourself.

Example:
  >>> s = dpjax.clipping.clip_and_sum({'a': jnp.ones((2, 3)), 'b': jnp.ones(2)},
  ...                                 {'a': 0.3, 'b': 0.4}, jnp.ones(2, bool))
  >>> s.grad_sum.l2_norm_clip, s.grad_sum.value['b']
  (0.5, Array(0.8, dtype=float32))
  >>> jax.tree.map(lambda x: 10 * x, s.grad_sum).l2_norm_clip
  5.0
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

PyTree = Any

UNITS = ('example', 'user', 'unclipped')


@jax.tree_util.register_pytree_node_class
class ClippedSum:
  """A sum of per-record contributions, each of L2 norm <= ``l2_norm_clip``.

  Built only by dpjax's clipping functions (see the module doc). Read the
  sum as ``.value`` (a pytree shaped like the parameters).

  Attributes:
    value: the clipped sum (pytree).
    l2_norm_clip: the bound of one record's contribution,
      ``clipped_norm_bound`` of the clip bounds used, after the arithmetic
      applied to the sum since (a float, or a scalar array when traced).
    unit: ``'example'`` or ``'user'``: the record whose contribution is
      bounded (``'unclipped'``: the noisy-SGD ablation's sum, whose bound is
      only the noise's nominal scale).
  """

  __slots__ = ('value', 'l2_norm_clip', 'probe', 'unit', 'shapes',
               'origin')

  def __init__(self, *args, **kwargs):
    del args, kwargs
    raise TypeError(
        'ClippedSum is built by dpjax\'s clipping functions only (e.g. '
        'dpjax.clipping.clip_and_sum(per_example_grads, l2_norm_clip, mask)'
        '.grad_sum), which clip what they sum.')

  @classmethod
  def _make(cls, value, bound, probe, unit, shapes, origin) -> 'ClippedSum':
    out = object.__new__(cls)
    for name, x in (('value', value), ('l2_norm_clip', bound),
                    ('probe', probe), ('unit', unit), ('shapes', shapes),
                    ('origin', origin)):
      object.__setattr__(out, name, x)
    return out

  def __setattr__(self, name, value):
    raise AttributeError('ClippedSum is immutable.')

  def __repr__(self) -> str:
    return (f'ClippedSum(value={self.value!r}, '
            f'l2_norm_clip={self.l2_norm_clip!r}, unit={self.unit!r})')

  def __add__(self, other: 'ClippedSum') -> 'ClippedSum':
    """The sum of two clipped sums of one unit: their bounds add.

    Their rows may overlap (a record in both moves the sum by both bounds).
    Micro-batches of one batch are summed with the bound C by
    ``clipped_grad_sum(..., microbatch_size=m)``.
    """
    if not (isinstance(other, ClippedSum) and other.unit == self.unit
            and other.shapes == self.shapes):
      return NotImplemented
    origin = (None if self.origin is None or other.origin is None
              else self.origin + other.origin)
    return ClippedSum._make(  # pylint: disable=protected-access
        jax.tree.map(lambda a, b: a + b, self.value, other.value),
        self.l2_norm_clip + other.l2_norm_clip, self.probe + other.probe,
        self.unit, self.shapes, origin)

  def __mul__(self, k: float) -> 'ClippedSum':
    """The sum scaled by a Python number k: the bound scales by |k|."""
    if isinstance(k, bool) or not isinstance(k, (int, float)):
      return NotImplemented
    k = float(k)
    return ClippedSum._make(  # pylint: disable=protected-access
        jax.tree.map(lambda a: k * a, self.value), k * self.l2_norm_clip,
        k * self.probe, self.unit, self.shapes,
        None if self.origin is None else k * self.origin)

  __rmul__ = __mul__

  def tree_flatten(self):
    return (self.value, self.l2_norm_clip, self.probe), (
        self.unit, self.shapes, self.origin)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls._make(*children, *aux)


def _shapes(value: PyTree) -> tuple:
  return tuple(tuple(np.shape(x)) for x in jax.tree.leaves(value))


def make(value: PyTree, bound: Any, unit: str = 'example') -> ClippedSum:
  """A ``ClippedSum`` of ``value`` under ``bound`` (``clipped_norm_bound``).

  For dpjax's clipping code only: ``value`` must be a sum of per-``unit``
  contributions each of L2 norm at most ``bound``.
  """
  if unit not in UNITS:
    raise ValueError(f'Expected unit={unit!r} in {UNITS}.')
  origin = None
  if not isinstance(bound, jax.core.Tracer):
    bound = origin = float(bound)
  return ClippedSum._make(value, bound, -2 * bound, unit,  # pylint: disable=protected-access
                          _shapes(value), origin)


def linear(s: ClippedSum) -> Any:
  """True (a bool, or a traced bool) if only scaling and adding touched ``s``.

  Raises:
    ValueError: naming ``updates``, when a leaf's shape changed (a map that
      reduces or reshapes) or, for concrete values, when the probe shows a
      map that is not linear.
  """
  if _shapes(s.value) != s.shapes:
    raise ValueError(
        'Expected updates to be a ClippedSum whose leaves kept their shapes '
        f'{s.shapes}, got {_shapes(s.value)}: a map that reduces or reshapes '
        'the sum does not keep its bound.')
  bound, probe = s.l2_norm_clip, s.probe
  ok = (jnp.shape(bound) == () and jnp.shape(probe) == ())
  if not ok:
    raise ValueError('Expected updates to be a ClippedSum of one run (a '
                     'scalar bound); index the run before the noise.')
  traced = any(isinstance(x, jax.core.Tracer) for x in (bound, probe))
  # A concrete C scaled by an array (traced or not) may have been scaled by
  # the data: only a Python-number bound, or one still equal to C, passes.
  pinned = s.origin is not None and not isinstance(bound, float)
  if traced:
    ok = jnp.asarray(probe) == -2 * jnp.asarray(bound)
    if pinned:
      ok = ok & (jnp.asarray(bound, jnp.float32) == np.float32(s.origin))
    return ok
  if not (np.isfinite(float(bound)) and float(probe) == -2 * float(bound)):
    raise ValueError(
        f'Expected updates to be a ClippedSum changed only by scaling and '
        f'adding clipped sums, got bound {float(bound)} with probe '
        f'{float(probe)} (not -2 x bound): a non-linear map of the sum (sign,'
        ' square, clip, an added constant) leaves no valid bound.')
  if pinned and np.float32(bound) != np.float32(s.origin):
    raise ValueError(
        f'Expected updates to be a ClippedSum scaled only by Python numbers, '
        f'got its bound {s.origin} turned into the array {float(bound)}: a '
        'scale that is an array may depend on the data (S / ||S|| moves by '
        'up to 2 whatever C), so it leaves no valid bound. Scale by a '
        'Python number, or after the noise.')
  return True


def unwrap(updates: Any) -> tuple[PyTree, Any, str, Any]:
  """``(value, |bound|, unit, linear)`` of the sum a noise step gets.

  Raises:
    ValueError: naming ``updates``: not a ``ClippedSum``, or (see
      ``linear``) one that a non-linear map has changed.
  """
  if not isinstance(updates, ClippedSum):
    raise ValueError(
        'Expected updates to be a ClippedSum (the output of '
        'clip_per_example, dpjax.clipping.clip_and_sum or clipped_grad_sum),'
        ' got a bare pytree: the noise is calibrated to the bound the sum '
        'carries and cannot tell a clipped sum from an unclipped one. Pass '
        'the clipping function\'s grad_sum as it is, or per-example '
        'gradients to a chain that clips them. (optax.MultiSteps passes its '
        'bare accumulator: to accumulate micro-batches into one noised step, '
        'use clipped_grad_sum(..., microbatch_size=m).)')
  ok = linear(updates)
  bound = updates.l2_norm_clip
  bound = abs(bound) if isinstance(bound, float) else jnp.abs(bound)
  return updates.value, bound, updates.unit, ok
