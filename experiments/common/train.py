"""The training loop: jitted DP-SGD (or non-private SGD) on Poisson batches.

One step (``experiments.common.train_step``) draws a Poisson batch with
``dpjax.sampling.PoissonSampler`` (fixed shape, masked), computes the clipped
per-example gradient sum with ``dpjax.clipped_grad_sum``, adds Gaussian noise of
stddev sigma * C, divides by the expected batch size and takes an (optionally
momentum) SGD step (Abadi et al. 2016, Alg. 1). The non-private baseline runs on
the same batches without clipping or noise. Every step that ran appends its
DpEvent, read from the chain's state, to a ``dpjax.accounting.PrivacyLedger``;
epsilon is read from that ledger. Several seeds run as one jitted program.

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
import functools
import math
import os
import time
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpjax import accounting
from experiments.common import checkpoint as checkpoint_lib
from experiments.common import data as data_lib
from experiments.common import progress as progress_lib
from experiments.common import validation
from experiments.common import train_step
from experiments.common.data import Dataset
from experiments.common.train_step import _compiled
from experiments.common.train_step import _keys
from experiments.common.train_step import _make_step
from experiments.common.train_step import make_sampler
from experiments.common.train_step import per_example_loss
from experiments.common.train_step import TrainConfig

# The step's other public names, here too (experiments use train.NAME).
ABLATIONS = train_step.ABLATIONS
check_devices = train_step.check_devices
data_mesh = train_step.data_mesh


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


# Epsilons by (composed event, relation, delta, accountant), for the whole
# process: the seeds of one program spend identical events (their ledgers
# differ only in keys), so do the settings of a sweep that share sigma, q
# and steps (every sparsification rate of a DP-SGD panel), and a PLD epsilon
# costs seconds.
_EPSILONS: dict[tuple, float] = {}


def _epsilon(ledger: accounting.PrivacyLedger, delta: float,
             accountant: str = 'rdp') -> float:
  """``ledger.epsilon(delta, accountant)``, computed once per distinct
  composed event in this process (``_EPSILONS``)."""
  key = (repr(ledger.event()), ledger.neighboring_relation, delta,
         accountant)
  if key not in _EPSILONS:
    _EPSILONS[key] = ledger.epsilon(delta, accountant)
  return _EPSILONS[key]


def _make_evaluate(model, data: Dataset):
  """Jitted ``evaluate(params [S, ...]) -> dict of [S] lists``: losses and
  accuracies per seed on train and test, and on ``data.x_val`` when the set
  has a validation split (``val_loss``, ``val_accuracy``)."""
  loss_fn = per_example_loss(model, data.task)
  x_tr, y_tr = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
  x_te, y_te = jnp.asarray(data.x_test), jnp.asarray(data.y_test)
  val = None if data.x_val is None else (jnp.asarray(data.x_val),
                                         jnp.asarray(data.y_val))
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
    if val is not None:  # a fixed validation split: metrics to tune on
      out['val_loss'] = jnp.mean(batch_loss(params, val))
      if data.task == 'classification':
        out['val_accuracy'] = accuracy(params, *val)
    return out

  # One transfer per evaluation (iterating a device array would dispatch a
  # slice per seed).
  return lambda params: {k: [float(x) for x in v]
                         for k, v in jax.device_get(evaluate(params)).items()}


@functools.partial(jax.jit, static_argnums=0)
def _unstack(num_seeds: int, tree: Any) -> list[Any]:
  """``[tree[i] for i < num_seeds]`` (every leaf indexed) in one dispatch."""
  return [jax.tree.map(lambda x, i=i: x[i], tree) for i in range(num_seeds)]


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
    from its chain's state by ``ledger.record_step`` (the event of
    ``dpjax.accounting.step_event`` and the noise stream that ran).
  """
  validation.open_unit(delta=delta)
  seeds = tuple(int(s) for s in seeds)
  if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError(f'Expected distinct seeds, got {seeds}.')
  start = time.time()
  runs = _SeedRuns(model, data, config, seeds, delta, seeds_as)
  if checkpoint_dir is not None:
    runs.resume(checkpoint_dir, seeds)
  runs.train(progress, desc, on_step)
  return runs.results(start)


class _SeedRuns:
  """The seeds' runs of ``train_seeds`` in progress: the stacked state, the
  step reached, and per seed its ledger and metric history."""

  def __init__(self, model: nn.Module, data: Dataset, config: TrainConfig,
               seeds: tuple[int, ...], delta: float, seeds_as: str):
    self.config, self.delta = config, delta
    self.sampler = make_sampler(config, len(data.x_train))
    self.evaluate = _compiled('evaluate', model, data, (),
                              lambda: _make_evaluate(model, data))
    init = _compiled('init', model, data, (),
                     lambda: jax.jit(jax.vmap(model.init, in_axes=(0, None))))
    params = init(jnp.stack([_keys(dataclasses.replace(config, seed=s))[
        'init'] for s in seeds]), data.x_train[0])
    opt_state, self.step_fn = _make_step(model, config, data, params, seeds,
                                         seeds_as)
    self.state = {'params': params, 'opt_state': opt_state}
    self.ledgers = [accounting.PrivacyLedger() for _ in seeds]
    self.histories, self.step, self.resumed_from = [[] for _ in seeds], 0, None
    self.ckpt = None
    # Each step's privacy states (the sigma, divisor and noise step that ran,
    # per seed) stay on device and are recorded at the next sync point, so
    # the ledgers hold what ran without a device sync per step.
    self.pending = []

  def resume(self, checkpoint_dir: str, seeds: tuple[int, ...]) -> None:
    """Checkpoints go to ``checkpoint_dir``; resumes the run kept there (of
    the same configuration and seeds), checking its ledgers."""
    self.ckpt = checkpoint_lib.Checkpointer(
        checkpoint_dir, dict(self.config.to_dict(), seed=list(seeds)))
    restored = self.ckpt.restore_latest(self.state)
    if restored is None:
      return
    self.step, self.state, meta = restored
    self.ledgers = [accounting.PrivacyLedger.from_json(j)
                    for j in meta['ledgers']]
    self.histories, self.resumed_from = meta['histories'], self.step
    expected_events = self.step if self.config.private else 0
    for ledger in self.ledgers:
      if ledger.num_events != expected_events:
        raise checkpoint_lib.CheckpointError(
            f'Checkpoint at step {self.step} in {checkpoint_dir} has a ledger '
            f'of {ledger.num_events} events; expected {expected_events}.')

  def train(self, progress: bool, desc: str,
            on_step: Callable[[int], None] | None) -> None:
    """Steps to ``config.steps``: evaluates every ``eval_every`` steps and
    at the end, checkpoints every ``checkpoint_every`` and at the end."""
    config = self.config
    bar = progress_lib.Progress(config.steps, desc, enabled=progress,
                               initial=self.step)
    params, opt_state = self.state['params'], self.state['opt_state']
    shown = {}  # metrics of the last evaluation, for the progress line
    while self.step < config.steps:
      params, opt_state, drawn = self.step_fn(params, opt_state,
                                              jnp.int32(self.step))
      self.step += 1
      if config.private:
        self.pending.append((accounting.privacy_states(opt_state), drawn))
      self.state = {'params': params, 'opt_state': opt_state}
      if self.step % config.eval_every == 0 or self.step == config.steps:
        self.record_pending()
        self.log_metrics()
        shown = {k: v for k, v in self.histories[0][-1].items()
                 if k in ('train_loss', 'test_accuracy', 'epsilon')}
      if self.ckpt is not None and (self.step == config.steps or (
          config.checkpoint_every and
          self.step % config.checkpoint_every == 0)):
        self.record_pending()
        self.save()
      bar.update(1, **shown)
      shown = {}
      if on_step is not None:
        on_step(self.step)
    bar.close()
    self.record_pending()
    if not self.histories[0] or self.histories[0][-1]['step'] != self.step:
      self.log_metrics()

  def record_pending(self) -> None:
    """Records the pending steps in the seeds' ledgers."""
    for ran, drawn in self.pending:
      # Each seed's part of the step's states and batch, fetched at once.
      per_seed = jax.device_get(_unstack(len(self.ledgers), (ran, drawn)))
      for ledger, (ran_i, drawn_i) in zip(self.ledgers, per_seed):
        ledger.record_step(ran_i, self.sampler, drawn_i)
    self.pending.clear()

  def epsilon(self, ledger: accounting.PrivacyLedger) -> float:
    private = self.config.private and ledger.num_events
    return _epsilon(ledger, self.delta) if private else 0.0

  def log_metrics(self) -> None:
    """Appends the current metrics (and epsilon so far) to each history."""
    metrics = self.evaluate(self.state['params'])
    for i, (history, ledger) in enumerate(zip(self.histories, self.ledgers)):
      history.append({'step': self.step,
                      **{k: v[i] for k, v in metrics.items()},
                      'epsilon': self.epsilon(ledger)})

  def save(self) -> None:
    self.ckpt.save(self.step, self.state,
                   {'ledgers': [l.to_json() for l in self.ledgers],
                    'histories': self.histories})

  def results(self, start: float) -> list[TrainResult]:
    """One ``TrainResult`` per seed; ``start`` is the call's start time."""
    final = jax.device_get(self.state['params'])
    seconds = time.time() - start
    return [TrainResult(jax.tree.map(lambda x, i=i: x[i], final), ledger,
                        history, history[-1], self.resumed_from, seconds)
            for i, (ledger, history) in enumerate(zip(self.ledgers,
                                                      self.histories))]


def steps_for_epochs(epochs: float, expected_batch_size: int,
                     num_examples: int) -> int:
  """Number of steps that visits each example ``epochs`` times in expectation."""
  return max(1, math.ceil(epochs * num_examples / expected_batch_size))


def sweep_data(cfg: Any) -> Dataset:
  """A sweep's data: ``cfg.dataset`` (drawn with ``cfg.seed``; digits in its
  place if ``cfg.allow_fallback``) with a validation split, its own or
  ``cfg.validation_fraction`` of the train split."""
  return data_lib.with_validation(
      data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback),
      cfg.validation_fraction, cfg.seed)


def sweep_base(cfg: Any, num_examples: int) -> dict[str, Any]:
  """``TrainConfig`` fields every run of a sweep shares, from its config
  (epochs, batch, SGD, evaluations, clipping, devices); C is 1 until a run
  sets its own."""
  steps = steps_for_epochs(cfg.epochs, cfg.expected_batch_size, num_examples)
  return dict(steps=steps, expected_batch_size=cfg.expected_batch_size,
              learning_rate=cfg.learning_rate, momentum=cfg.momentum,
              l2_norm_clip=1.0, devices=getattr(cfg, 'devices', 1),
              eval_every=max(1, steps // cfg.num_evals), clipping=cfg.clip_method)


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
    eps = {a: _epsilon(res.ledger, delta, a) if config.private else None
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
