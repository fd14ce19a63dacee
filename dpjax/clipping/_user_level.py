"""User-level clipping: each user's whole contribution is clipped as one.

Example-level DP-SGD bounds what one example can do; a user with k examples
moves an example-level clipped sum by up to k C. User-level DP-SGD (McMahan
et al. 2018, "Learning differentially private recurrent language models",
Alg. 1 with one local step; Levy et al. 2021 "Learning with user-level
privacy") clips the gradient of each user's summed loss,

    sum_u clip_C( grad sum_{k: mask[u, k]} loss(params, x[u, k]) ),

so adding or removing one user, with any number of examples, moves the sum by
at most C (replacing one, 2 C). The batch is shaped ``[users, examples per
user, ...]`` with a boolean mask ``[users, examples per user]``; a row of the
mask with no True is a padded user and contributes exactly zero. Both
clipping paths (``vmap``, ``ghost``) apply: the user is the "example" of
``clipped_grad_sum`` and its examples are an inner axis.
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpjax import _clipped_sum

from dpjax.clipping import _per_example

PyTree = Any


def _check_user_mask(mask: Any, batch: PyTree) -> jax.Array:
  """A boolean ``[users, examples per user]`` mask matching the batch."""
  if mask is None:
    raise ValueError('Expected mask= (bool [users, examples per user], False '
                     'on padded examples and padded users).')
  mask = jnp.asarray(mask)
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
  """Returns ``fn(params, batch, mask)``: the user-level clipped sum.

  Args:
    loss_fn: ``loss_fn(params, example) -> scalar`` for ONE example.
    l2_norm_clip: the bound C of one user's contribution (scalar or per-layer
      bounds, as ``clipped_grad_sum``).
    method: ``'vmap'`` or ``'ghost'`` (the same sum; see
      ``clipped_grad_sum``).
    fallback: ghost only, as ``clipped_grad_sum``.

  Returns:
    A jittable ``fn(params, batch, mask, coordinate_mask=None)`` for a
    ``batch`` whose leaves are ``[U, K, ...]`` and ``mask`` bool ``[U, K]``;
    it returns ``ClippedGradSum``: ``grad_sum`` a ``ClippedSum`` bounded by
    ``clipped_norm_bound(l2_norm_clip)`` per USER, ``norms`` one per user.
    Its unit is ``'user'``. Feed ``grad_sum`` to ``dpsgd(learning_rate,
    None, sigma, expected_batch_size, per_example=False, key=...)`` and
    account with a user-level sampler
    (``dpjax.sampling.UserPoissonSampler``):
    ``dpjax.accounting.step_event`` refuses a per-user sum under a
    per-example sampler, and the reverse.

  Raises:
    ValueError: a mask that is not boolean ``[U, K]``, or a batch leaf whose
      leading axes differ from the mask's (a forgotten user axis).

  Privacy:
    Adding or removing one user (with any number of examples) moves the sum
    by at most ``clipped_norm_bound(l2_norm_clip)`` in L2, replacing one by
    twice that. A user whose gradient is not finite (e.g. NaN in one of its
    examples) is dropped whole. Padded examples enter the user's loss with
    weight 0; make them finite (e.g. zeros), or a NaN there drops the user.

  References:
    McMahan et al. 2018, Alg. 1 (per-user clipping); Levy et al. 2021.

  Example:
    >>> loss = lambda w, x: jnp.sum(w * x)
    >>> fn = clipped_user_grad_sum(loss, 1.0)
    >>> x = jnp.ones((2, 3, 2))  # 2 users, 3 examples each
    >>> mask = jnp.array([[True, True, True], [True, False, False]])
    >>> out = fn(jnp.zeros(2), x, mask)
    >>> out.norms  # user 0 sums 3 gradients (1, 1), user 1 one
    Array([4.2426405, 1.4142135], dtype=float32)
  """
  def user_loss(params, user):
    examples, keep = user
    losses = jax.vmap(loss_fn, in_axes=(None, 0))(params, examples)
    return jnp.sum(jnp.where(keep, losses, jnp.zeros_like(losses)))

  inner = _per_example.clipped_grad_sum(user_loss, l2_norm_clip, method,
                                        fallback=fallback)

  def fn(params, batch, mask, coordinate_mask=None):
    mask = _check_user_mask(mask, batch)
    out = inner(params, (batch, mask), jnp.any(mask, axis=1),
                coordinate_mask)
    return out._replace(grad_sum=_clipped_sum.make(
        out.grad_sum.value, out.grad_sum.l2_norm_clip, 'user'))

  return fn
