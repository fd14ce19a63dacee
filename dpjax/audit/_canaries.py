"""Gradient and input-space canaries for one-run audits of DP-SGD.

The strongest setting of Steinke, Nasr & Jagielski (2023, Sec. 6): the
auditor controls the gradient of each canary example and sees every noisy
update. Canary i is a "Dirac" example whose gradient is a large multiple of
the clip bound along its own parameter coordinate, so after clipping it adds
exactly C to that coordinate in every step it takes part in, and nothing
elsewhere. The score of canary i is the sum over steps of the (negated)
update's coordinate i: a sum of T Gaussians whose mean is shifted iff the
canary was included.

Example:
  >>> scores_fn = dpsgd_gradient_canaries(8, steps=2, noise_multiplier=1.0)
  >>> scores_fn(jax.random.key(0), jnp.ones(8, bool)).shape
  (8,)
"""

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import optax

from dpjax import _clipped_sum
from dpjax import _keys
from dpjax import _validate
from dpjax import clipping
from dpjax import transforms

_STREAM = _keys.register('audit_canaries', __name__)


@dataclasses.dataclass(frozen=True)
class _RowSampling:
  """The run's sampling, for the chain's divisor: each present row kept at
  ``sampling_rate``, over ``expected_rows`` present rows on average (the n
  examples and half of the m canaries)."""
  sampling_rate: float
  expected_rows: float

  unit = 'example'

  @property
  def expected_batch_size(self) -> float:
    return self.sampling_rate * self.expected_rows


def dpsgd_gradient_canaries(num_canaries: int, *, steps: int,
                            noise_multiplier: float,
                            l2_norm_clip: float = 1.0,
                            canary_gradient_norm: float | None = None,
                            sampling_rate: float = 1.0,
                            num_examples: int = 16, num_features: int = 4,
                            learning_rate: float = 0.1, clip: bool = True
                            ) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """``scores_fn`` for ``one_run_audit``: DP-SGD with gradient canaries.

  The model is a linear regression on ``num_examples`` random examples
  (parameters ``w``) plus one parameter per canary (``canary``). Canary i's
  loss is ``canary_gradient_norm * params['canary'][i]``, so its gradient is
  that multiple of e_i. Each of ``steps`` steps runs ``dpjax.dpsgd`` on the
  per-example gradients of the real examples and the included canaries,
  every row kept with probability ``sampling_rate`` (Poisson; 1 means full
  batch). White-box score: minus the sum of the updates to
  ``params['canary']`` (Steinke, Nasr & Jagielski 2023, Sec. 6).

  Args:
    num_canaries: m, one parameter coordinate per canary.
    steps: T >= 1.
    noise_multiplier: sigma >= 0 of the run.
    l2_norm_clip: C > 0.
    canary_gradient_norm: the canaries' gradient norm; default 10 C (any
      value >= C clips to C).
    sampling_rate: Poisson rate q in (0, 1] of every row in every step.
    num_examples: real examples (>= 1) drawn from the run's key.
    num_features: features of the linear model (>= 1).
    learning_rate: SGD step size (> 0); it scales all scores alike.
    clip: False skips clipping (the sum of raw gradients gets noise for C):
      a deliberately broken run that an audit should catch.

  Returns:
    ``scores_fn(key, included: bool[m]) -> float[m]``, jitted; the key draws
    the data, the noise and the sampling.

  Privacy:
    With ``clip=True`` the run is DP-SGD: adding or removing one canary is
    covered by ``dpjax.accounting.gaussian_event(noise_multiplier,
    sampling_rate=sampling_rate, steps=steps)``, the claim a one-run audit
    tests.

  Example:
    >>> f = dpsgd_gradient_canaries(4, steps=50, noise_multiplier=0.01)
    >>> s = f(jax.random.key(0), jnp.array([True, False, True, False]))
    >>> bool(s[0] > s[1] and s[2] > s[3])
    True
  """
  _validate.positive_int(num_canaries=num_canaries)
  _check_run(steps, noise_multiplier, l2_norm_clip, sampling_rate,
             learning_rate)
  if canary_gradient_norm is None:
    canary_gradient_norm = 10.0 * l2_norm_clip
  _validate.positive(canary_gradient_norm=canary_gradient_norm)
  _validate.positive_int(num_examples=num_examples)
  _validate.positive_int(num_features=num_features)
  m, n, k = num_canaries, num_examples, num_features
  run = dict(steps=steps, noise_multiplier=noise_multiplier,
             l2_norm_clip=l2_norm_clip, sampling_rate=sampling_rate,
             learning_rate=learning_rate, clip=clip,
             sampler=_RowSampling(sampling_rate, n + m / 2))

  def loss(params, example):
    residual = jnp.dot(example['x'], params['w']) - example['y']
    return (0.5 * residual**2
            + jnp.dot(example['canary'], params['canary']))

  def scores_fn(key, included):
    data_key, noise_key, sample_key = jax.random.split(key, 3)
    x_key, w_key, y_key = jax.random.split(data_key, 3)
    x = jax.random.normal(x_key, (n, k))
    y = x @ jax.random.normal(w_key, (k,)) + 0.1 * jax.random.normal(
        y_key, (n,))
    batch = {
        'x': jnp.concatenate([x, jnp.zeros((m, k))]),
        'y': jnp.concatenate([y, jnp.zeros(m)]),
        'canary': jnp.concatenate([jnp.zeros((n, m)),
                                   canary_gradient_norm * jnp.eye(m)]),
    }
    rows = jnp.concatenate([jnp.ones(n, bool), included])
    params = {'w': jnp.zeros(k), 'canary': jnp.zeros(m)}
    _, updates = _train(loss, params, batch, rows, noise_key, sample_key,
                        **run)
    return -jnp.sum(updates['canary'], axis=0)

  return _checked(jax.jit(scores_fn), m)


def dpsgd_input_canaries(x: jax.Array, y: jax.Array, canary_x: jax.Array,
                         canary_y: jax.Array, *, num_classes: int, steps: int,
                         noise_multiplier: float, l2_norm_clip: float = 1.0,
                         sampling_rate: float = 1.0,
                         learning_rate: float = 0.5, clip: bool = True
                         ) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """``scores_fn`` for ``one_run_audit``: black-box input-space canaries.

  Softmax regression trained by ``steps`` DP-SGD steps (``dpjax.dpsgd``,
  Poisson rate ``sampling_rate``) on the examples ``(x, y)`` and the
  included canaries ``(canary_x, canary_y)`` (e.g. inputs with random
  labels); the auditor sees only the final model. Score of canary i: the
  log-probability of its label under that model (Steinke, Nasr & Jagielski
  2023, Sec. 6, black-box). Far weaker than gradient canaries, as the paper
  finds: the last model averages the canary's influence with everything
  else.

  Args:
    x: [n, d] float features; y: [n] integer labels in [0, num_classes).
    canary_x: [m, d] canary inputs; canary_y: [m] their labels.
    num_classes: K >= 2.
    steps, noise_multiplier, l2_norm_clip, sampling_rate, learning_rate,
      clip: as for ``dpsgd_gradient_canaries``.

  Returns:
    ``scores_fn(key, included: bool[m]) -> float[m]``, jitted; the key
    draws the noise and the sampling.

  Privacy:
    As ``dpsgd_gradient_canaries``: ``dpjax.accounting.gaussian_event(
    noise_multiplier, sampling_rate=sampling_rate, steps=steps)`` with
    ``clip=True``.

  Example:
    >>> x = jax.random.normal(jax.random.key(0), (32, 4))
    >>> f = dpsgd_input_canaries(x, (x[:, 0] > 0).astype(jnp.int32),
    ...                          -x[:8], jnp.zeros(8, jnp.int32),
    ...                          num_classes=2, steps=3, noise_multiplier=1.0)
    >>> f(jax.random.key(1), jnp.ones(8, bool)).shape
    (8,)
  """
  _check_run(steps, noise_multiplier, l2_norm_clip, sampling_rate,
             learning_rate)
  _validate.integer_at_least(2, num_classes=num_classes)
  x, canary_x = jnp.asarray(x, jnp.float32), jnp.asarray(canary_x,
                                                         jnp.float32)
  y, canary_y = jnp.asarray(y, jnp.int32), jnp.asarray(canary_y, jnp.int32)
  if (x.ndim != 2 or canary_x.shape[1:] != x.shape[1:]
      or y.shape != x.shape[:1] or canary_y.shape != canary_x.shape[:1]):
    raise ValueError(f'Expected x [n, d], y [n], canary_x [m, d], canary_y '
                     f'[m]; got {x.shape}, {y.shape}, {canary_x.shape}, '
                     f'{canary_y.shape}.')
  for name, labels in (('y', y), ('canary_y', canary_y)):
    if labels.size and not (0 <= int(labels.min())
                            and int(labels.max()) < num_classes):
      raise ValueError(f'Expected {name} in [0, {num_classes}).')
  n, m = x.shape[0], canary_x.shape[0]
  _validate.positive_int(num_canaries=m)
  run = dict(steps=steps, noise_multiplier=noise_multiplier,
             l2_norm_clip=l2_norm_clip, sampling_rate=sampling_rate,
             learning_rate=learning_rate, clip=clip,
             sampler=_RowSampling(sampling_rate, n + m / 2))

  def log_prob(params, inputs, labels):
    logits = inputs @ params['w'] + params['b']
    return jnp.take_along_axis(jax.nn.log_softmax(logits),
                               labels[..., None], axis=-1)[..., 0]

  def loss(params, example):
    return -log_prob(params, example['x'], example['y'])

  batch = {'x': jnp.concatenate([x, canary_x]),
           'y': jnp.concatenate([y, canary_y])}

  def scores_fn(key, included):
    noise_key, sample_key = jax.random.split(key)
    rows = jnp.concatenate([jnp.ones(n, bool), included])
    params = {'w': jnp.zeros((x.shape[1], num_classes)),
              'b': jnp.zeros(num_classes)}
    final, _ = _train(loss, params, batch, rows, noise_key, sample_key,
                      **run)
    return log_prob(final, canary_x, canary_y)

  return _checked(jax.jit(scores_fn), m)


def _check_run(steps, noise_multiplier, l2_norm_clip, sampling_rate,
               learning_rate) -> None:
  _validate.positive_int(steps=steps)
  _validate.non_negative(noise_multiplier=noise_multiplier)
  _validate.finite(noise_multiplier=noise_multiplier)
  _validate.positive(l2_norm_clip=l2_norm_clip)
  _validate.half_open_unit(sampling_rate=sampling_rate)
  _validate.positive(learning_rate=learning_rate)


def _train(loss, params, batch, rows, noise_key, sample_key, *, steps,
           noise_multiplier, l2_norm_clip, sampling_rate, learning_rate, clip,
           sampler):
  """``steps`` DP-SGD steps on the rows of ``batch`` where ``rows`` holds,
  each kept with probability ``sampling_rate`` per step; returns the final
  parameters and the stacked updates."""
  grads_fn = clipping.per_example_grads(loss)
  # clip=False is the unclipped ablation: the bare sum, wrapped as an
  # 'unclipped' sum (noise stddev sigma C, no event), takes the clipped sum's
  # place.
  tx = transforms.dpsgd(learning_rate, l2_norm_clip if clip else None,
                        noise_multiplier, sampler, key=noise_key,
                        per_example=clip)

  def step(carry, t):
    params, state = carry
    mask = rows
    if sampling_rate < 1:
      mask = mask & jax.random.bernoulli(
          jax.random.fold_in(sample_key, t), sampling_rate, rows.shape)
    grads = grads_fn(params, batch)
    if clip:
      updates, state = tx.update(grads, state, params, mask=mask)
    else:  # the unclipped sum goes where the clipped sum belongs
      raw_sum = jax.tree.map(
          lambda g: jnp.tensordot(mask.astype(g.dtype), g, axes=1), grads)
      raw_sum = _clipped_sum.make(
          raw_sum, clipping.clipped_norm_bound(l2_norm_clip), 'unclipped')
      updates, state = tx.update(raw_sum, state, params)
    return (optax.apply_updates(params, updates), state), updates

  (final, _), updates = jax.lax.scan(step, (params, tx.init(params)),
                                     jnp.arange(steps))
  return final, updates


def _checked(jitted, m):
  def checked(key, included):
    included = jnp.asarray(included)
    if included.shape != (m,) or included.dtype != jnp.bool_:
      raise ValueError(f'Expected included of shape ({m},) and dtype bool, '
                       f'got shape {included.shape} and dtype '
                       f'{included.dtype}.')
    return jitted(_keys.stream(_validate.key(key), _STREAM), included)

  return checked
