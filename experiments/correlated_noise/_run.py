"""correlated_noise's run: each part's private runs at one target epsilon.

sigma is calibrated under RDP for the exact event each sampler runs; the
epsilon reported is read back from the last step's optimizer state of the
run (``dpjax.accounting.step_event``: for adaptive clipping the combined noise of
the gradient and the count) composed over the steps.
"""

from typing import Any

import jax
import numpy as np

import dpjax
from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.correlated_noise import _training
from experiments.correlated_noise._config import Config
from experiments.correlated_noise._results import Adaptive
from experiments.correlated_noise._results import BandMf
from experiments.correlated_noise._results import Part
from experiments.correlated_noise._results import Results
from experiments.correlated_noise._results import Unit
from experiments.correlated_noise._results import UserLevel

DATASET = 'mnist5k'  # real MNIST digits with a validation split


def _epsilon(state, sampler, steps, delta, axes):
  one = jax.tree.map(lambda a: a[(0,) * axes], state)
  event = accounting.step_event(one, sampler)
  return dict(noise_multiplier=float(event.noise_multiplier) if hasattr(
      event, 'noise_multiplier') else None,
              epsilon=float(accounting.epsilon(event, delta, steps=steps)))


def _selected(params, ds, settings: list) -> dict[str, Any]:
  """Validation and test accuracy [seeds, settings]; per seed, the setting
  with the best validation accuracy (ties: the first) and its test
  accuracy."""
  val = np.asarray(_training.evaluate(params, ds.x_val, ds.y_val))
  test = np.asarray(_training.evaluate(params, ds.x_test, ds.y_test))
  val, test = val.reshape(len(val), -1), test.reshape(len(test), -1)
  chosen = np.argmax(val, axis=1)
  return dict(settings=settings, val=val.tolist(), test=test.tolist(),
              chosen=[settings[i] for i in chosen],
              selected_test=test[np.arange(len(chosen)), chosen].tolist())


def _noise_state(state):
  """The chain's one correlated ``DpsgdNoiseState`` (the noise that ran)."""
  found = [s for s in accounting.privacy_states(state)
           if isinstance(s, dpjax.transforms.DpsgdNoiseState)
           and s.correlation is not None]
  if len(found) != 1:
    raise ValueError(f'expected one correlated-noise state, found {len(found)}')
  return found[0]


def _user_ids(n: int, per_user: int, seed: int) -> np.ndarray:
  """A fixed random partition of the train split into users of equal size."""
  order = np.random.default_rng(seed).permutation(n)
  ids = np.empty(n, np.int64)
  ids[order] = np.arange(n) // per_user
  return ids


def _grid(pairs) -> tuple[np.ndarray, np.ndarray]:
  """The (C, lr) pairs as two float32 arrays."""
  return (np.asarray([c for c, _ in pairs], np.float32),
          np.asarray([lr for _, lr in pairs], np.float32))


def _fixed(cfg: Config, ds, keys, sampler, sigma: float, steps: int,
           pairs) -> Part:
  """DP-SGD over the (C, lr) grid."""
  params, state = _training.fixed_clip(cfg, sampler, sigma, steps)(
      keys, *_grid(pairs), ds.x_train, ds.y_train)
  return Part(**_selected(params, ds, pairs),
              **_epsilon(state, sampler, steps, cfg.delta, 2))


def _bandmf(cfg: Config, ds, keys, steps: int, pairs,
            ctx: runner.Context) -> BandMf:
  """BandMF over the (C, lr) grid, cyclic Poisson over ``bands``
  partitions; its epsilon is the event of the sigma read from the run."""
  n, bands = len(ds.x_train), cfg.bands
  cyclic = dpjax.sampling.CyclicPoissonSampler(
      n, cfg.expected_batch_size * bands / n, bands)
  strategy = dpjax.correlated_noise.banded_toeplitz(
      dpjax.correlated_noise.optimize_banded_toeplitz(steps, bands), steps)
  event = lambda s: dpjax.correlated_noise.bandmf_event(
      s, strategy, steps=steps, min_separation=bands,
      sampling_rate=cyclic.sampling_rate)
  sigma = accounting.calibrate(event, cfg.epsilon, cfg.delta)
  ctx.say(f'BandMF, {bands} bands, sigma {sigma:.3f}')
  params, state = _training.bandmf(cfg, cyclic, sigma, steps, strategy)(
      keys, *_grid(pairs), ds.x_train, ds.y_train)
  noise = jax.tree.map(lambda a: a[0, 0], _noise_state(state))
  read_sigma = float(noise.noise_multiplier)
  return BandMf(
      **_selected(params, ds, pairs), bands=bands, noise_multiplier=read_sigma,
      partition_rate=cyclic.sampling_rate,
      epsilon=float(accounting.epsilon(event(read_sigma), cfg.delta)))


def _adaptive(cfg: Config, ds, keys, sampler, sigma: float,
              steps: int) -> Adaptive:
  """Adaptive clipping over the learning rates, from the smallest C."""
  lrs = list(cfg.learning_rates)
  params, state = _training.adaptive_clip(cfg, sampler, sigma, steps)(
      keys, np.asarray(lrs, np.float32), ds.x_train, ds.y_train)
  selected = _selected(params, ds, lrs)
  final_clip = np.asarray(state[0].l2_norm_clip).tolist()
  return Adaptive(**selected, **_epsilon(state, sampler, steps, cfg.delta, 2),
                  final_clip=final_clip,
                  chosen_final_clip=[final_clip[s][lrs.index(lr)] for s, lr
                                     in enumerate(selected['chosen'])])


def _units(cfg: Config, ds, keys, ctx: runner.Context
           ) -> tuple[UserLevel, Unit]:
  """User-level DP-SGD and example-level DP-SGD at the same epsilon, the
  same expected examples per step and the same steps."""
  n, per_user = len(ds.x_train), cfg.num_examples_per_user
  lrs = np.asarray(cfg.learning_rates, np.float32)
  users = dpjax.sampling.UserPoissonSampler(
      _user_ids(n, per_user, cfg.seed),
      cfg.expected_num_users / (n // per_user),
      max_examples_per_user=per_user)
  steps = int(round(cfg.epochs / users.sampling_rate))
  user_sigma = accounting.calibrate(users.dp_event, cfg.epsilon, cfg.delta,
                                    steps=steps)
  examples = dpjax.PoissonSampler(n, cfg.expected_num_users * per_user / n)
  example_sigma = accounting.calibrate(examples.dp_event, cfg.epsilon,
                                       cfg.delta, steps=steps)
  ctx.say(f'user level: sigma {user_sigma:.3f} (users) vs '
          f'{example_sigma:.3f} (examples), {steps} steps')
  parts = []
  for train, sampler, sigma, record, extra in (
      (_training.user_level, users, user_sigma, UserLevel,
       dict(num_users=users.num_users, unit='user')),
      (_training.example_level, examples, example_sigma, Unit,
       dict(unit='example'))):
    params, state = train(cfg, sampler, sigma, steps)(
        keys, lrs, ds.x_train, ds.y_train)
    parts.append(record(**_selected(params, ds, list(cfg.learning_rates)),
                        **_epsilon(state, sampler, steps, cfg.delta, 2),
                        steps=steps, rate=sampler.sampling_rate, **extra))
  return parts[0], parts[1]


def run(cfg: Config, ctx: runner.Context) -> Results:
  ds = data_lib.load(DATASET, seed=cfg.seed)
  n = len(ds.x_train)
  keys = jax.vmap(jax.random.key)(np.asarray(cfg.seeds))
  sampler = dpjax.PoissonSampler(n, cfg.expected_batch_size / n)
  steps = int(round(cfg.epochs / sampler.sampling_rate))
  sigma = accounting.calibrate(sampler.dp_event, cfg.epsilon, cfg.delta,
                               steps=steps)
  pairs = [(c, lr) for c in cfg.l2_norm_clips for lr in cfg.learning_rates]
  ctx.say(f'{len(pairs)} fixed (C, lr), sigma {sigma:.3f}, {steps} steps')
  fixed = _fixed(cfg, ds, keys, sampler, sigma, steps, pairs)
  correlated = _bandmf(cfg, ds, keys, steps, pairs, ctx)
  ctx.say('adaptive clipping')
  adaptive = _adaptive(cfg, ds, keys, sampler, sigma, steps)
  user, example = _units(cfg, ds, keys, ctx)
  return Results(dataset=report_lib.dataset_info(ds), steps=steps,
                 sampling_rate=sampler.sampling_rate, fixed=fixed,
                 adaptive=adaptive, bandmf=correlated, user_level=user,
                 example_level=example)
