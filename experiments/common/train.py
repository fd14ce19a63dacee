"""The training loop: jitted DP-SGD (or non-private SGD) on Poisson batches.

One step draws a Poisson batch with ``dpjax.sampling.PoissonSampler`` (fixed
shape, masked), computes the clipped per-example gradient sum with
``dpjax.clipped_grad_sum``, adds Gaussian noise of stddev sigma * C, divides by
the expected batch size and takes an (optionally momentum) SGD step
(Abadi et al. 2016, Alg. 1). The non-private baseline runs on the same batches
without clipping or noise. Every step that ran appends its DpEvent, read from
the chain's state, to a ``dpjax.accounting.PrivacyLedger``; epsilon is read
from that ledger. Several seeds run as one jitted program.

With ``devices=N > 1`` the clipped sum of a step is computed data-parallel
over the first N devices (``dpjax.clipping.sharded_clipped_grad_sum``: the
batch split over a mesh axis, one psum); the noise, the rest of the chain and
the ledger are those of one device, so the run equals the single-device run
up to float rounding.

Everything random derives from the seed: model init, the batch of step t
(``fold_in(batch_key, t)``) and the noise of step t. With checkpoints, a run
killed and resumed ends bit-identical to an uninterrupted one.
"""

import dataclasses
import math
import os
import time
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import dpjax
from experiments.common import validation
from dpjax import accounting
from experiments.common import checkpoint as checkpoint_lib
from experiments.common import progress as progress_lib
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


class TrainResult(NamedTuple):
  """What a run produced.

  Attributes:
    params: final parameters.
    ledger: the privacy ledger of every step that ran (empty if non-private).
    history: list of metric dicts (step, train_loss, test metric, epsilon).
    final: the last history entry.
    resumed_from: the checkpoint step the run resumed from, or None.
    seconds: wall time of this call (compilation included).
  """
  params: Any
  ledger: accounting.PrivacyLedger
  history: list[dict[str, float]]
  final: dict[str, float]
  resumed_from: int | None
  seconds: float


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


def _make_evaluate(model, data: Dataset):
  """Jitted ``evaluate(params [S, ...]) -> dict of [S] lists``: losses and accuracies per seed."""
  loss_fn = per_example_loss(model, data.task)
  x_tr, y_tr = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
  x_te, y_te = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
  batch_loss = jax.vmap(loss_fn, in_axes=(None, 0))
  predict = jax.vmap(model.apply, in_axes=(None, 0))

  def accuracy(params, x, y):
    pred = jnp.argmax(predict(params, x), axis=-1)
    return jnp.mean((pred == y).astype(jnp.float32))

  @jax.jit
  @jax.vmap
  def evaluate(params):
    out = {'train_loss': jnp.mean(batch_loss(params, (x_tr, y_tr))),
           'test_loss': jnp.mean(batch_loss(params, (x_te, y_te)))}
    if data.task == 'classification':
      out['train_accuracy'] = accuracy(params, x_tr, y_tr)
      out['test_accuracy'] = accuracy(params, x_te, y_te)
    return out

  return lambda params: {k: [float(x) for x in v]
                         for k, v in evaluate(params).items()}


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


def _transform(config: TrainConfig, keys, schedule, hp):
  """The run's update rule, built from dpjax's aliases with traced ``hp``.

  The chain receives the (clipped, for DP-SGD and clipped_sgd) gradient sum
  of the batch (``per_example=False``): noise sigma * C (none without a
  noise multiplier), the sparsity mask when RS is on, division by the
  expected batch size and (momentum) SGD.
  """
  momentum = config.momentum or None
  if config.noise_multiplier is None and not config.clips:  # non-private
    return optax.chain(dpjax.normalize(hp['batch']),
                       optax.sgd(hp['lr'], momentum=momentum))
  sigma = hp.get('sigma', 0.0)  # clipped_sgd: clipping without noise
  if schedule is None:
    return dpjax.dpsgd(hp['lr'], hp['clip'], sigma, hp['batch'],
                       key=keys['noise'], momentum=momentum,
                       per_example=False, clip=config.clips)
  return dpjax.rs_dpsgd(hp['lr'], hp['clip'], sigma, hp['batch'],
                        schedule._replace(num_zeros=hp['num_zeros']),
                        key=keys['noise'], mask_key=hp['mask_key'],
                        momentum=momentum, per_example=False,
                        clip=config.clips)


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

  def build():
    loss_fn = per_example_loss(model, data.task)
    sampler = make_sampler(config, len(data.x_train))
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    batch_loss = jax.vmap(loss_fn, in_axes=(None, 0))
    plain_sum = jax.grad(
        lambda p, ex, mask: jnp.sum(jnp.where(mask, batch_loss(p, ex), 0.0)))
    if config.devices > 1:
      mesh = data_mesh(config.devices)
      clipped_sum = lambda clip: dpjax.clipping.sharded_clipped_grad_sum(
          loss_fn, clip, config.clipping, mesh=mesh, axis_name='data')
    else:
      clipped_sum = lambda clip: dpjax.clipped_grad_sum(
          loss_fn, clip, method=config.clipping)

    def step(params, opt_state, t, hp):
      batch = sampler.sample(hp['batch_key'], t)
      examples = (x[batch.indices], y[batch.indices])
      m = None if schedule is None else dpjax.transforms.sparsity_mask(
          hp['mask_key'], t, params,
          schedule._replace(num_zeros=hp['num_zeros']))
      if config.clips:
        grad_sum = clipped_sum(hp['clip'])(
            params, examples, batch.mask, coordinate_mask=m).grad_sum
      else:
        grad_sum = _apply_mask(plain_sum(params, examples, batch.mask), m)
      tx = _transform(config, {'noise': hp['noise_key']}, schedule, hp)
      updates, opt_state = tx.update(grad_sum, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state,
              (batch.key, batch.step))

    if seeds_as == 'vmap':
      return jax.jit(jax.vmap(step, in_axes=(0, 0, None, 0)))
    return jax.jit(lambda p, o, t, h: jax.lax.map(
        lambda a: step(a[0], a[1], t, a[2]), (p, o, h)))

  step = _compiled('step', model, data, static, build)
  hp = _stack([_hyperparameters(dataclasses.replace(config, seed=s), schedule)
               for s in seeds])
  init_state = jax.vmap(
      lambda h, p: _transform(config, {'noise': h['noise_key']}, schedule,
                              h).init(p))(hp, params)
  return init_state, lambda params, opt_state, t: step(params, opt_state, t,
                                                       hp)


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


def train(model: nn.Module, data: Dataset, config: TrainConfig, *,
          delta: float = 1e-5, checkpoint_dir: str | None = None,
          progress: bool = True, desc: str = '',
          on_step: Callable[[int], None] | None = None) -> TrainResult:
  """Trains ``model`` on ``data`` with ``config.seed``; see ``train_seeds``."""
  return train_seeds(model, data, config, (config.seed,), delta=delta,
                     checkpoint_dir=checkpoint_dir, progress=progress,
                     desc=desc, on_step=on_step)[0]


def train_seeds(model: nn.Module, data: Dataset, config: TrainConfig,
                seeds: Sequence[int], *, delta: float = 1e-5,
                checkpoint_dir: str | None = None, progress: bool = True,
                desc: str = '',
                on_step: Callable[[int], None] | None = None,
                seeds_as: str = 'vmap') -> list[TrainResult]:
  """Trains one run per seed, all seeds as one jitted program.

  Seed s is exactly the run ``config`` with ``seed=s`` (its own keys).

  Args:
    model: a flax module applied to ONE example.
    data: the dataset (``data.task`` picks the loss).
    config: the runs' hyperparameters (``config.seed`` is ignored).
    seeds: the seeds, distinct.
    delta: the delta at which epsilon is reported.
    checkpoint_dir: where checkpoints go; an existing run there is resumed
      (its configuration and seeds must match) and never silently restarted.
    progress: a tqdm bar on a terminal, else a line every 30 s with the step,
      the first seed's metrics (epsilon so far) and an ETA.
    desc: the bar's label.
    on_step: called with the step count after every step (tests use it).
    seeds_as: 'vmap' (default) or 'map' (a loop in the one program).

  Returns:
    One ``TrainResult`` per seed, in the order of ``seeds``.

  Privacy:
    Each private step of each seed is the Poisson-subsampled Gaussian
    mechanism; each seed's ledger holds one event per executed step, read
    from its chain's state by ``dpjax.transforms.dpsgd_step_event``.
  """
  validation.open_unit(delta=delta)
  seeds = tuple(int(s) for s in seeds)
  if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError(f'Expected distinct seeds, got {seeds}.')
  start = time.time()
  sampler = make_sampler(config, len(data.x_train))
  evaluate = _compiled('evaluate', model, data, (),
                       lambda: _make_evaluate(model, data))
  init = _compiled('init', model, data, (),
                   lambda: jax.jit(jax.vmap(model.init, in_axes=(0, None))))
  params = init(jnp.stack([_keys(dataclasses.replace(config, seed=s))['init']
                           for s in seeds]), data.x_train[0])
  opt_state, step_fn = _make_step(model, config, data, params, seeds,
                                  seeds_as)
  state = {'params': params, 'opt_state': opt_state}
  ledgers = [accounting.PrivacyLedger() for _ in seeds]
  histories, step, resumed_from = [[] for _ in seeds], 0, None
  ckpt = None
  if checkpoint_dir is not None:
    ckpt = checkpoint_lib.Checkpointer(
        checkpoint_dir, dict(config.to_dict(), seed=list(seeds)))
    restored = ckpt.restore_latest(state)
    if restored is not None:
      step, state, meta = restored
      ledgers = [accounting.PrivacyLedger.from_json(j)
                 for j in meta['ledgers']]
      histories, resumed_from = meta['histories'], step
      expected_events = step if config.private else 0
      for ledger in ledgers:
        if ledger.num_events != expected_events:
          raise checkpoint_lib.CheckpointError(
              f'Checkpoint at step {step} in {checkpoint_dir} has a ledger of '
              f'{ledger.num_events} events; expected {expected_events}.')

  def epsilon(ledger):
    return ledger.epsilon(delta) if config.private and ledger.num_events else 0.0

  def log_metrics():
    metrics = evaluate(state['params'])
    for i, (history, ledger) in enumerate(zip(histories, ledgers)):
      history.append({'step': step, **{k: v[i] for k, v in metrics.items()},
                      'epsilon': epsilon(ledger)})

  def save():
    ckpt.save(step, state, {'ledgers': [l.to_json() for l in ledgers],
                            'histories': histories})

  bar = progress_lib.Progress(config.steps, desc, enabled=progress,
                             initial=step)
  params, opt_state = state['params'], state['opt_state']
  # Each step's privacy states (the sigma, divisor and noise step that ran,
  # per seed) stay on device and are recorded at the next sync point, so the
  # ledgers hold what ran without a device sync per step.
  pending = []
  shown = {}  # metrics of the last evaluation, for the progress line

  def record_pending():
    for ran, drawn in pending:
      for i, ledger in enumerate(ledgers):
        event, noise = dpjax.transforms.dpsgd_step_event(
            jax.tree.map(lambda x, i=i: x[i], ran), sampler,
            noise_multiplier=config.noise_multiplier)
        ledger.record(event, noise=noise,
                      batch=jax.tree.map(lambda x, i=i: x[i], drawn))
    pending.clear()

  while step < config.steps:
    params, opt_state, drawn = step_fn(params, opt_state, jnp.int32(step))
    step += 1
    if config.private:
      pending.append((dpjax.transforms.privacy_states(opt_state), drawn))
    state = {'params': params, 'opt_state': opt_state}
    if step % config.eval_every == 0 or step == config.steps:
      record_pending()
      log_metrics()
      shown = {k: v for k, v in histories[0][-1].items()
               if k in ('train_loss', 'test_accuracy', 'epsilon')}
    if ckpt is not None and (step == config.steps or (
        config.checkpoint_every and step % config.checkpoint_every == 0)):
      record_pending()
      save()
    bar.update(1, **shown)
    shown = {}
    if on_step is not None:
      on_step(step)
  bar.close()
  record_pending()
  if not histories[0] or histories[0][-1]['step'] != step:
    log_metrics()
  final = jax.device_get(state['params'])
  seconds = time.time() - start
  return [TrainResult(jax.tree.map(lambda x, i=i: x[i], final), ledger,
                      history, history[-1], resumed_from, seconds)
          for i, (ledger, history) in enumerate(zip(ledgers, histories))]


def steps_for_epochs(epochs: float, expected_batch_size: int,
                     num_examples: int) -> int:
  """Number of steps that visits each example ``epochs`` times in expectation."""
  return max(1, math.ceil(epochs * num_examples / expected_batch_size))


def sweep_base(cfg: dict[str, Any], num_examples: int) -> dict[str, Any]:
  """``TrainConfig`` fields an experiment's sweep shares, from its config."""
  steps = steps_for_epochs(cfg['epochs'], cfg['expected_batch_size'],
                           num_examples)
  return dict(steps=steps, expected_batch_size=cfg['expected_batch_size'],
              learning_rate=cfg['learning_rate'], momentum=cfg['momentum'],
              l2_norm_clip=cfg['l2_norm_clip'],
              devices=cfg.get('devices', 1),
              eval_every=max(1, steps // cfg['evals']))


def run_seeds_and_record(module: nn.Module, data: Dataset,
                         config: TrainConfig, seeds: Sequence[int], *,
                         delta: float, out_dir: str, label: str,
                         progress: bool = True, **fields: Any
                         ) -> list[dict[str, Any]]:
  """Trains the seeds as one program (resuming from ``out_dir/checkpoints/
  label``) and returns a row per seed.

  A row carries every number with its privacy context: the final metrics,
  epsilon under RDP and PLD (None if the run is not private), delta, the
  dataset that ran, the seed and the exact training configuration, plus any
  ``fields`` the experiment adds (model name, setting, ...).
  """
  results = train_seeds(
      module, data, config, seeds, delta=delta, progress=progress,
      desc=label, checkpoint_dir=os.path.join(out_dir, 'checkpoints',
                                              label.replace(' ', '_')))
  rows = []
  for seed, res in zip(seeds, results):
    eps = {a: res.ledger.epsilon(delta, a) if config.private else None
           for a in ('rdp', 'pld')}
    run_config = dataclasses.replace(config, seed=seed)
    rows.append(dict(
        fields, **{k: v for k, v in res.final.items() if k != 'step'},
        seed=seed, noise_multiplier=config.noise_multiplier, delta=delta,
        epsilon_rdp=eps['rdp'], epsilon_pld=eps['pld'], dataset=data.name,
        steps=config.steps, seconds=round(res.seconds / len(seeds), 2),
        resumed_from=res.resumed_from, train_config=run_config.to_dict(),
        history=res.history))
  return rows
