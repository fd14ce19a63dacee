"""A run's configuration and its jitted DP-SGD (or SGD) step, seeds stacked.

``TrainConfig`` holds the hyperparameters of one run. ``_make_step`` builds
the step of several seeds' runs as one jitted program: it draws a Poisson
batch with ``dpjax.sampling.PoissonSampler`` (fixed shape, masked), computes
the clipped per-example gradient sum with ``dpjax.clipped_grad_sum``, and
applies the run's ``dpjax`` chain: Gaussian noise of stddev sigma * C, the
expected batch size as divisor and an (optionally momentum) SGD step
(Abadi et al. 2016, Alg. 1); random sparsification masks the gradient and
the noise alike (Zhu & Blaschko, Alg. 1). The non-private baseline runs on
the same batches without clipping or noise.

With ``devices=N > 1`` the clipped sum of a step is computed data-parallel
over the first N devices (``dpjax.clipping.sharded_clipped_grad_sum``: the
batch split over a mesh axis, one psum); the noise and the rest of the chain
are those of one device.

Everything random derives from the seed (``_keys``): model init, the batch
of step t (``fold_in(batch_key, t)``), the noise of step t and the masks.
The loop around the step is ``experiments.common.train``.
"""

import dataclasses
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from experiments.common import validation
from experiments.common.data import Dataset


ABLATIONS = ('clipped_sgd', 'noisy_sgd')


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Hyperparameters of one run.

  ``noise_multiplier=None`` is plain SGD; a noise multiplier makes it DP-SGD.
  ``ablation='clipped_sgd'`` clips without noise and ``'noisy_sgd'`` adds the
  noise sigma * C without clipping (Zhu & Blaschko Algs. 3 and 2; neither is
  private). ``sparsify_rate > 0`` adds random sparsification before clipping
  with gradual cooling and one mask per epoch (or per refresh), noise masked
  alike (Alg. 1).
  """
  steps: int
  expected_batch_size: int
  learning_rate: float
  momentum: float = 0.9
  l2_norm_clip: float = 1.0
  noise_multiplier: float | None = None
  ablation: str | None = None
  sparsify_rate: float = 0.0
  sparsify_refresh_per_epoch: int = 1
  clipping: str = 'vmap'
  devices: int = 1  # data-parallel DP-SGD over the first N devices
  eval_every: int = 100
  checkpoint_every: int = 0  # 0: only at the end (if a directory is given)
  seed: int = 0

  def __post_init__(self):
    validation.positive_int(steps=self.steps,
                           expected_batch_size=self.expected_batch_size,
                           eval_every=self.eval_every,
                           devices=self.devices,
                           sparsify_refresh_per_epoch=(
                               self.sparsify_refresh_per_epoch))
    validation.non_negative_int(checkpoint_every=self.checkpoint_every,
                               seed=self.seed)
    validation.positive(learning_rate=self.learning_rate,
                       l2_norm_clip=self.l2_norm_clip)
    validation.non_negative(momentum=self.momentum)
    if self.noise_multiplier is not None:
      validation.non_negative(noise_multiplier=self.noise_multiplier)
    check_devices(self.devices)
    if self.ablation not in (None,) + ABLATIONS:
      raise ValueError(f'Expected ablation={self.ablation!r} in {ABLATIONS}.')
    if (self.ablation == 'noisy_sgd') != (
        self.ablation is not None and self.noise_multiplier is not None):
      raise ValueError(f'ablation={self.ablation!r} with noise_multiplier='
                       f'{self.noise_multiplier}: noisy_sgd needs a noise '
                       'multiplier and clipped_sgd must not have one.')
    if not 0 <= self.sparsify_rate < 1:
      raise ValueError(f'Expected sparsify_rate={self.sparsify_rate} in '
                       '[0, 1).')

  @property
  def private(self) -> bool:
    return self.noise_multiplier is not None and self.ablation is None

  @property
  def clips(self) -> bool:
    return self.private or self.ablation == 'clipped_sgd'

  def to_dict(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    if self.devices == 1:  # the default: configurations stored before it
      del out['devices']   # existed (checkpoints, results) stay valid
    return out


def check_devices(devices: int) -> None:
  """Refuses more data-parallel devices than JAX has."""
  validation.positive_int(devices=devices)
  available = jax.device_count()
  if devices > available:
    raise ValueError(
        f'Expected devices={devices} <= jax.device_count()={available}. On a '
        'CPU-only machine, force host devices before JAX starts: '
        f'XLA_FLAGS=--xla_force_host_platform_device_count={devices}')


def data_mesh(devices: int) -> jax.sharding.Mesh:
  """A 1-D mesh over the first ``devices`` devices, axis 'data'."""
  check_devices(devices)
  return jax.sharding.Mesh(np.array(jax.devices()[:devices]), ('data',))


def per_example_loss(model: nn.Module, task: str) -> Callable[..., jax.Array]:
  """``loss(params, (x, y))`` of ONE example: cross-entropy or squared error."""
  if task == 'classification':
    def loss(params, example):
      x, y = example
      return optax.softmax_cross_entropy_with_integer_labels(
          model.apply(params, x), y)
  elif task == 'regression':
    def loss(params, example):
      x, y = example
      return 0.5 * jnp.sum(jnp.square(model.apply(params, x) - y))
  else:
    raise ValueError(f'Expected task={task!r} in (classification, regression).')
  return loss


def _keys(config: TrainConfig):
  """Independent keys of a run: init, batches, noise and sparsity masks."""
  seed_key = jax.random.key(config.seed)
  return {name: jax.random.fold_in(seed_key, i)
          for i, name in enumerate(('init', 'batch', 'noise', 'mask'))}


def _mask_schedule(config: TrainConfig, params, num_examples: int):
  """The run's random-sparsification schedule, or None without RS."""
  if not config.sparsify_rate:
    return None
  steps_per_epoch = max(1, round(num_examples / config.expected_batch_size))
  return dpjax.transforms.SparsityMaskSchedule.cooling(
      config.sparsify_rate, math.ceil(config.steps / steps_per_epoch),
      steps_per_epoch, params,
      min(config.sparsify_refresh_per_epoch, steps_per_epoch))


_COMPILED: dict[tuple, tuple] = {}


def _compiled(kind: str, model: nn.Module, data: Dataset, static: tuple,
              build: Callable[[], Any]) -> Any:
  """Builds once per (model, data, static settings): sweeps reuse the jit.

  Hyperparameters that vary across a sweep (C, sigma, lr, seed keys, the
  sparsity schedule) are arguments of the jitted functions, so runs of an
  experiment share one compilation.
  """
  key = (kind, id(model), id(data), static)
  hit = _COMPILED.get(key)
  if hit is None or hit[0] is not model or hit[1] is not data:
    hit = _COMPILED[key] = (model, data, build())
  return hit[2]


def _transform(config: TrainConfig, sampler, keys, schedule, hp):
  """The run's update rule, built from dpjax's aliases with traced ``hp``.

  ``sampler`` is the run's (``make_sampler``): the private chains divide by
  its expected batch size. The chain receives the gradient sum of the batch
  (``per_example=False``): for DP-SGD and clipped_sgd the ``ClippedSum``
  whose bound C the noise follows, for noisy_sgd the ``unclipped_sum`` of
  nominal scale C. Then noise sigma * C (none without a noise multiplier),
  the sparsity mask when RS is on, division by the expected batch size and
  (momentum) SGD.
  """
  momentum = config.momentum or None
  if config.noise_multiplier is None and not config.clips:  # non-private
    return optax.chain(dpjax.normalize(hp['batch']),
                       optax.sgd(hp['lr'], momentum=momentum))
  sigma = hp.get('sigma', 0.0)  # clipped_sgd: clipping without noise
  if schedule is None:
    return dpjax.dpsgd(hp['lr'], None, sigma, sampler,
                       key=keys['noise'], momentum=momentum,
                       per_example=False)
  return dpjax.rs_dpsgd(hp['lr'], None, sigma, sampler,
                        schedule._replace(num_zeros=hp['num_zeros']),
                        key=keys['noise'], mask_key=hp['mask_key'],
                        momentum=momentum, per_example=False)


def _hyperparameters(config: TrainConfig, schedule) -> dict[str, Any]:
  """The traced hyperparameters of one seed's run (keys included)."""
  keys = _keys(config)
  hp = {'batch_key': keys['batch'], 'noise_key': keys['noise'],
        'lr': jnp.float32(config.learning_rate),
        'clip': jnp.float32(config.l2_norm_clip),
        'batch': jnp.float32(config.expected_batch_size)}
  if config.noise_multiplier is not None:
    hp['sigma'] = jnp.float32(config.noise_multiplier)
  if schedule is not None:
    hp.update(mask_key=keys['mask'], num_zeros=jnp.asarray(schedule.num_zeros))
  return hp


def _make_step(model, config: TrainConfig, data: Dataset, params,
               seeds: tuple[int, ...], seeds_as: str = 'vmap'):
  """``(init_state, step)`` of the seeds' runs, stacked on a leading axis.

  The step draws the batch, takes the (clipped) gradient sum of the masked
  coordinates (``dpjax.clipped_grad_sum``, vmap or ghost) and applies the
  run's ``dpjax`` chain (``_transform``): noise, the same mask again,
  normalization and SGD. The seeds (their keys are the mapped
  hyperparameters) run as one jitted program, ``jax.vmap``-ed or, with
  ``seeds_as='map'``, as a ``jax.lax.map`` loop (``experiments.bench.seeds``
  compares both with separate runs).
  Hyperparameters are traced arguments, so every run of a sweep with the
  same static settings and number of seeds shares one compilation.
  """
  if seeds_as not in ('vmap', 'map'):
    raise ValueError(f"Expected seeds_as={seeds_as!r} in ('vmap', 'map').")
  one = jax.tree.map(lambda x: x[0], params)
  schedule = _mask_schedule(config, one, len(data.x_train))
  static = (config.clips, config.noise_multiplier is not None,
            config.clipping, config.expected_batch_size, config.momentum,
            None if schedule is None else
            (schedule.steps_per_epoch, schedule.refresh_per_epoch),
            len(seeds), seeds_as, config.devices)
  step = _compiled('step', model, data, static,
                   lambda: _build_step(model, config, data, schedule,
                                       seeds_as))
  hp = _stack([_hyperparameters(dataclasses.replace(config, seed=s), schedule)
               for s in seeds])
  sampler = make_sampler(config, len(data.x_train))
  init_state = jax.vmap(
      lambda h, p: _transform(config, sampler, {'noise': h['noise_key']},
                              schedule, h).init(p))(hp, params)
  return init_state, lambda params, opt_state, t: step(params, opt_state, t,
                                                       hp)


def _clipped_sum(loss_fn, config: TrainConfig):
  """The run's clipped gradient sum as a function of its bound C
  (``config.clipping``; data-parallel over ``config.devices`` > 1)."""
  if config.devices > 1:
    mesh = data_mesh(config.devices)
    return lambda clip: dpjax.clipping.sharded_clipped_grad_sum(
        loss_fn, clip, config.clipping, mesh=mesh, axis_name='data')
  return lambda clip: dpjax.clipped_grad_sum(
      loss_fn, clip, method=config.clipping)


def _build_step(model, config: TrainConfig, data: Dataset, schedule,
                seeds_as: str):
  """The jitted ``step(params, opt_state, t, hp)`` of ``_make_step``, seeds
  mapped over the leading axis of ``params``, ``opt_state`` and ``hp``."""
  loss_fn = per_example_loss(model, data.task)
  sampler = make_sampler(config, len(data.x_train))
  x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
  batch_loss = jax.vmap(loss_fn, in_axes=(None, 0))
  plain_sum = jax.grad(
      lambda p, ex, mask: jnp.sum(jnp.where(mask, batch_loss(p, ex), 0.0)))
  clipped_sum = _clipped_sum(loss_fn, config)

  def step(params, opt_state, t, hp):
    batch = sampler.sample(hp['batch_key'], t)
    examples = (x[batch.indices], y[batch.indices])
    # The mask the chain applies to the noisy sum at this step, read from
    # its state (computed once, by the chain).
    m = None if schedule is None else dpjax.transforms.next_sparsity_mask(
        opt_state)
    if config.clips:
      grad_sum = clipped_sum(hp['clip'])(
          params, examples, batch.mask, coordinate_mask=m).grad_sum
    else:
      grad_sum = _apply_mask(plain_sum(params, examples, batch.mask), m)
      if config.noise_multiplier is not None:  # noisy_sgd
        grad_sum = dpjax.clipping.unclipped_sum(grad_sum, hp['clip'])
    tx = _transform(config, sampler, {'noise': hp['noise_key']}, schedule, hp)
    updates, opt_state = tx.update(grad_sum, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state,
            (batch.key, batch.step))

  if seeds_as == 'vmap':
    return jax.jit(jax.vmap(step, in_axes=(0, 0, None, 0)))
  return jax.jit(lambda p, o, t, h: jax.lax.map(
      lambda a: step(a[0], a[1], t, a[2]), (p, o, h)))


def _stack(trees):
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _apply_mask(tree, mask):
  return tree if mask is None else jax.tree.map(jnp.multiply, tree, mask)


def make_sampler(config: TrainConfig, num_examples: int):
  """The Poisson sampler of a run (rate expected_batch_size / N)."""
  if config.expected_batch_size > num_examples:
    raise ValueError(f'Expected expected_batch_size={config.expected_batch_size}'
                     f' <= the {num_examples} training examples.')
  return dpjax.sampling.PoissonSampler(
      num_examples, config.expected_batch_size / num_examples)
