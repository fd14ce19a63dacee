"""User-level clipping: each user's whole contribution is clipped as one.

Example-level DP-SGD bounds what one example can do; a user with k examples
moves an example-level clipped sum by up to k C. User-level DP-SGD (McMahan
et al. 2018, "Learning differentially private recurrent language models",
Alg. 1 with one local step; Levy et al. 2021 "Learning with user-level
privacy") clips the gradient of each user's summed loss,

    sum_u clip_C( grad sum_{k: mask[u, k]} loss(params, x[u, k]) ),

so adding or removing one user, with any number of examples, moves the sum by
at most C (replacing one, 2 C). The batch is shaped ``[users, examples per
user, ...]``; which of its slots are real comes from the
``dpjax.sampling.UserBatch`` it was gathered with (its boolean ``mask``,
``[users, examples per user]``); a row of the mask with no True is a padded
user and contributes exactly zero. Both clipping paths (``vmap``, ``ghost``)
apply: the user is the "example" of ``clipped_grad_sum`` and its examples
are an inner axis.

The sum takes the ``UserBatch`` itself, not a bare mask: the sampler fills
every padded slot, of a padded user or past a user's last example, with
example 0, so a mask that marks padding as real (e.g. ``jnp.ones``) would
add example 0 to every padded row, and its user could move the sum by many
times C. A ``UserBatch`` cannot be confused with such an array.
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpjax import _clipped_sum
from dpjax import sampling
from dpjax.clipping import _per_example

PyTree = Any


def _check_user_mask(user_batch: Any, batch: PyTree) -> jax.Array:
  """The mask of a ``UserBatch``: boolean ``[users, examples per user]``."""
  if not isinstance(user_batch, sampling.UserBatch):
    raise ValueError(
        'Expected user_batch to be the dpjax.sampling.UserBatch the batch was '
        'gathered with (UserPoissonSampler.sample), whose mask is False on '
        f'padded users and examples; got {type(user_batch).__name__}. A bare '
        'mask is refused: an all-True one would count the padding (example 0 '
        'in every padded slot) as real examples.')
  mask = jnp.asarray(user_batch.mask)
  if mask.dtype != jnp.bool_ or mask.ndim != 2:
    raise ValueError(f'Expected a boolean mask of shape [users, examples per '
                     f'user], got dtype {mask.dtype} and shape {mask.shape}.')
  for path, leaf in jax.tree_util.tree_leaves_with_path(batch):
    if tuple(jnp.shape(leaf)[:2]) != tuple(mask.shape):
      raise ValueError(
          f'Expected every batch leaf to start with the mask\'s shape '
          f'{tuple(mask.shape)} (users, examples per user), got '
          f'{tuple(jnp.shape(leaf))} at {jax.tree_util.keystr(path)}. '
          'Missing user axis?')
  return mask


def clipped_user_grad_sum(loss_fn: Callable[[PyTree, PyTree], jax.Array],
                          l2_norm_clip: Any, method: str = 'vmap', *,
                          fallback: str = 'per_example'
                          ) -> Callable[..., _per_example.ClippedGradSum]:
  """Returns ``fn(params, batch, user_batch)``: the user-level clipped sum.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
    l2_norm_clip: the bound C of one user's contribution (scalar or per-layer
      bounds, as ``clipped_grad_sum``).
    method: ``'vmap'`` or ``'ghost'`` (the same sum; see
      ``clipped_grad_sum``).
    fallback: ghost only, as ``clipped_grad_sum``.

  Returns:
    A jittable ``fn(params, batch, user_batch, coordinate_mask=None)`` for a
    ``batch`` whose leaves are ``[U, K, ...]`` (e.g. ``x[user_batch.indices]``)
    and ``user_batch`` the ``dpjax.sampling.UserBatch`` it was gathered with:
    only ``user_batch.mask`` (bool ``[U, K]``) is read. Data grouped by user
    without the sampler passes ``UserBatch(indices, mask, num_sampled)``
    with its own padding's mask. ``fn`` returns ``ClippedGradSum``:
    ``grad_sum`` a ``ClippedSum`` bounded by
    ``clipped_norm_bound(l2_norm_clip)`` per USER, ``norms`` one per user.
    Its unit is ``'user'``. Feed ``grad_sum`` to ``dpsgd(learning_rate,
    None, sigma, sampler, per_example=False, key=...)`` with the
    user-level sampler the batch came from, and account with it
    (``dpjax.sampling.UserPoissonSampler``):
    ``dpjax.accounting.step_event`` refuses a per-user sum under a
    per-example sampler, and the reverse.

  Raises:
    ValueError: a ``user_batch`` that is not a ``UserBatch`` (a bare mask
      array, even a correct one: module doc), a mask that is not boolean
      ``[U, K]``, or a batch leaf whose leading axes differ from the mask's
      (a forgotten user axis).

  Privacy:
    Adding or removing one user (with any number of examples) moves the sum
    by at most ``clipped_norm_bound(l2_norm_clip)`` in L2, replacing one by
    twice that, provided ``user_batch.mask`` is False on every padded slot
    (the sampler's is; a mask marking padding as real lets one user's
    example 0 enter many rows). A user whose gradient is not finite (e.g.
    NaN in one of its examples) is dropped whole. Padded examples enter the
    user's loss with weight 0; make them finite (e.g. zeros), or a NaN there
    drops the user.

  References:
    McMahan et al. 2018, Alg. 1 (per-user clipping); Levy et al. 2021.

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> fn = clipped_user_grad_sum(loss, 1.0)
    >>> s = sampling.UserPoissonSampler(np.array([0, 0, 0, 1]), 1.0,
    ...                                 max_examples_per_user=3)
    >>> users = s.sample(jax.random.key(0), 0)
    >>> users.indices.tolist()  # padded with example 0 (and a padded user)
    [[0, 1, 2], [3, 0, 0], [0, 0, 0]]
    >>> users.mask.tolist()
    [[True, True, True], [True, False, False], [False, False, False]]
    >>> x = jnp.ones((4, 2))  # the dataset: 4 examples
    >>> out = fn(jnp.zeros(2), x[users.indices], users)
    >>> out.norms  # user 0 sums 3 gradients (1, 1), user 1 one, padding 0
    Array([4.2426405, 1.4142135, 0.       ], dtype=float32)
  """
  def user_loss(params, user):
    examples, keep = user
    losses = jax.vmap(loss_fn, in_axes=(None, 0))(params, examples)
    return jnp.sum(jnp.where(keep, losses, jnp.zeros_like(losses)))

  inner = _per_example.clipped_grad_sum(user_loss, l2_norm_clip, method,
                                        fallback=fallback)

  def fn(params, batch, user_batch, coordinate_mask=None):
    mask = _check_user_mask(user_batch, batch)
    out = inner(params, (batch, mask), jnp.any(mask, axis=1),
                coordinate_mask)
    return out._replace(grad_sum=_clipped_sum.make(
        out.grad_sum.value, out.grad_sum.l2_norm_clip, 'user'))

  return fn
