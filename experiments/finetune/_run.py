"""finetune's run: pretrain in public, then every private run per epsilon.

sigma is calibrated under RDP for each target epsilon (Poisson sampling);
the epsilon reported is read back from the last step's optimizer state of
each run (``dpjax.accounting.step_event``) composed over the steps. The learning
rate of every (method, epsilon) is chosen per seed on the validation split.
"""

from typing import Any

import jax
import numpy as np

import dpjax
from dpjax import accounting
from experiments.common import data as data_lib
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.finetune import _training
from experiments.finetune._config import Config
from experiments.finetune._results import Pretrained
from experiments.finetune._results import Public
from experiments.finetune._results import Results

DATASET = 'mnist5k'  # the private data, with a validation split
# The non-private members: noise 0 and a clip no per-example gradient of
# this model reaches, the same program and batches as the private ones.
NON_PRIVATE_CLIP = 1e6


def _selected(val: np.ndarray, test: np.ndarray) -> dict[str, Any]:
  """Per seed, the member with the best validation accuracy (ties: the
  first) and its test accuracy; ``val``, ``test``: [seeds, members]."""
  chosen = np.argmax(val, axis=1)
  return dict(val=val.tolist(), test=test.tolist(), chosen=chosen.tolist(),
              selected_test=test[np.arange(len(chosen)), chosen].tolist())


def _epsilon(state, sampler, steps: int, delta: float, member: int):
  one = jax.tree.map(lambda a: a[0, member], state)
  event = accounting.step_event(one, sampler)
  return float(accounting.epsilon(event, delta, steps=steps))


def _pretrained(cfg: Config, ds, ctx: runner.Context):
  """The public digits, the model pretrained on them and its accuracy."""
  x_pub, y_pub = _training.public_digits()
  pretrained = _training.pretrain(cfg, x_pub, y_pub, jax.random.key(cfg.seed))
  pre = lambda x, y: float(_training.evaluate(
      cfg, 'full', jax.tree.map(lambda a: a[None, None], pretrained),
      pretrained, x, y)[0, 0])
  accuracy = Pretrained(public_train=pre(x_pub, y_pub),
                        val=pre(ds.x_val, ds.y_val),
                        test=pre(ds.x_test, ds.y_test))
  ctx.say(f'pretrained: {accuracy.test:.3f} on MNIST-5k test')
  return x_pub, pretrained, accuracy


def _members(cfg: Config, sigmas: list[float]):
  """(epsilon index or None for non-private, lr) of every member, and their
  noise multipliers, clips and learning rates; every method runs them all."""
  lrs = list(cfg.learning_rates)
  members = [(e, lr) for e in range(len(sigmas)) for lr in lrs]
  members += [(None, lr) for lr in lrs]
  sigma = np.asarray([0.0 if e is None else sigmas[e] for e, _ in members],
                     np.float32)
  clip = np.asarray([NON_PRIVATE_CLIP if e is None else cfg.l2_norm_clip
                     for e, _ in members], np.float32)
  rates = np.asarray([lr for _, lr in members], np.float32)
  return members, (sigma, clip, rates)


def _starts(cfg: Config, sampler, steps: int, keys, ds, pretrained):
  """Per method: (program, its start per seed, the frozen tree)."""
  dense = _training.dense_program(cfg, sampler, steps)
  return dict(
      scratch=(dense, _training.init_scratch(cfg, keys, ds.x_train[:1]),
               None),
      full=(dense, jax.tree.map(lambda a: np.broadcast_to(
          a, (len(cfg.seeds),) + a.shape), pretrained), None),
      lora=(_training.lora_program(cfg, sampler, steps),
            np.zeros(len(cfg.seeds)), pretrained))


def _parts(cfg: Config, members, sigmas, trained, state, val, test, sampler,
           steps: int):
  """One method's parts: per target epsilon (str), and the non-private."""
  lrs = list(cfg.learning_rates)
  one = jax.tree.map(lambda a: a[0, 0], trained)  # one run's tree
  dimension = sum(int(a.size) for a in jax.tree.leaves(one))
  private, non_private = {}, None
  for e, eps in enumerate(list(cfg.epsilons) + [None]):
    cols = [i for i, (m, _) in enumerate(members)
            if m == (None if eps is None else e)]
    part = dict(**_selected(val[:, cols], test[:, cols]),
                chosen_lr=[lrs[i] for i in np.argmax(val[:, cols], axis=1)],
                dimension=dimension)
    if eps is None:
      non_private = part
    else:
      private[str(eps)] = dict(
          **part, noise_multiplier=float(sigmas[e]),
          epsilon=_epsilon(state, sampler, steps, cfg.delta, cols[0]))
  return private, non_private, dimension


def run(cfg: Config, ctx: runner.Context) -> Results:
  ds = data_lib.load(DATASET, seed=cfg.seed)
  x_pub, pretrained, pretrained_acc = _pretrained(cfg, ds, ctx)
  n = len(ds.x_train)
  sampler = dpjax.PoissonSampler(n, cfg.expected_batch_size / n)
  steps = int(round(cfg.epochs / sampler.sampling_rate))
  sigmas = [accounting.calibrate(sampler.dp_event, e, cfg.delta, steps=steps)
            for e in cfg.epsilons]
  members, hyper = _members(cfg, sigmas)
  keys = jax.vmap(jax.random.key)(np.asarray(cfg.seeds))
  starts = _starts(cfg, sampler, steps, keys, ds, pretrained)
  out, non_private, bits = {}, {}, {}
  for kind in _training.KINDS:
    ctx.say(f'{kind}: {len(members)} (eps, lr) members, {steps} steps')
    program, start, frozen = starts[kind]
    trained, state = program(keys, start, frozen, *hyper, ds.x_train,
                             ds.y_train)
    val, test = (_training.evaluate(cfg, kind, trained, pretrained, x, y)
                 for x, y in ((ds.x_val, ds.y_val), (ds.x_test, ds.y_test)))
    out[kind], non_private[kind], dimension = _parts(
        cfg, members, sigmas, trained, state, val, test, sampler, steps)
    bits[kind] = dpjax.transforms.dpsgd_bits(dimension)
  return Results(dataset=report_lib.dataset_info(ds),
                 public=Public(name='sklearn digits (8x8 -> 20x20, padded '
                               'to 28x28)', n=len(x_pub)),
                 steps=steps, sampling_rate=sampler.sampling_rate,
                 pretrained=pretrained_acc, private=out,
                 non_private=non_private,
                 bits=dict(full=bits['full'], lora=bits['lora']))
