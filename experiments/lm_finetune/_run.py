"""lm_finetune's run: pretrain on public code, fine-tune on private tests.

sigma is calibrated under the library's accountant for each target epsilon
(Poisson sampling, ``steps`` steps); the epsilon reported is read back from
the last state of each run (``dpjax.accounting.step_event``) composed over
the steps. Every method runs every epsilon and its non-private twin (noise
0, a clip no per-example gradient reaches) in one compiled program.
"""

import jax
import numpy as np

import dpjax
from dpjax import accounting
from experiments.common import runner
from experiments.lm_finetune import _corpus
from experiments.lm_finetune import _training
from experiments.lm_finetune._config import Config
from experiments.lm_finetune._results import Corpus
from experiments.lm_finetune._results import Results
from experiments.lm_finetune._results import Run

NON_PRIVATE_CLIP = 1e6
NON_PRIVATE = 'inf'  # the non-private twin's key among the epsilons


def _data(cfg: Config):
  sizes = dict(public=cfg.num_public, train=cfg.num_train, val=cfg.num_val,
               test=cfg.num_test)
  corpus = _corpus.load(cfg.seq_len, sizes, cfg.seed)
  dataset = dict(requested='python_stdlib', name='python_stdlib',
                 source=corpus.source, note='', n_train=cfg.num_train,
                 n_test=cfg.num_test)
  return corpus, dataset, Corpus(digest=corpus.digest, seq_len=cfg.seq_len,
                                 windows=sizes)


def _epsilon(state, sampler, steps: int, delta: float, member: int) -> float:
  one = jax.tree.map(lambda a: a[0, member], state)
  event = accounting.step_event(one, sampler)
  return float(accounting.epsilon(event, delta, steps=steps))


def _runs(cfg, kind, sigmas, trained, state, pretrained, corpus, sampler):
  """Per epsilon (str, and NON_PRIVATE): the method's ``Run``."""
  val, test = (_training.evaluate(cfg, kind, trained, pretrained, w)
               for w in (corpus.val, corpus.test))
  out = {}
  for m, eps in enumerate(list(cfg.epsilons) + [None]):
    private = eps is not None
    out[str(eps) if private else NON_PRIVATE] = Run(
        test_loss=test[:, m].tolist(), val_loss=val[:, m].tolist(),
        noise_multiplier=float(sigmas[m]),
        epsilon=(_epsilon(state, sampler, cfg.steps, cfg.delta, m)
                 if private else None))
  return out


def run(cfg: Config, ctx: runner.Context) -> Results:
  corpus, dataset, corpus_info = _data(cfg)
  pretrained = _training.pretrain(cfg, corpus.public, jax.random.key(cfg.seed))
  one = jax.tree.map(lambda a: a[None, None], pretrained)
  pre_loss = lambda w: float(_training.evaluate(cfg, 'full', one, pretrained,
                                                w)[0, 0])
  n = cfg.num_train
  sampler = dpjax.PoissonSampler(n, cfg.expected_batch_size / n)
  sigmas = [accounting.calibrate(sampler.dp_event, e, cfg.delta,
                                 steps=cfg.steps) for e in cfg.epsilons]
  sigmas = np.asarray(sigmas + [0.0], np.float32)
  clips = np.asarray([cfg.l2_norm_clip] * len(cfg.epsilons)
                     + [NON_PRIVATE_CLIP], np.float32)
  keys = jax.vmap(jax.random.key)(np.asarray(cfg.seeds))
  runs, dims = {}, {}
  for kind in _training.KINDS:
    ctx.say(f'{kind}: {len(sigmas)} members x {cfg.num_seeds} seeds, '
            f'{cfg.steps} steps')
    lr = cfg.lora_learning_rate if kind == 'lora' else cfg.full_learning_rate
    trained, state = _training.program(cfg, sampler, cfg.steps, kind)(
        keys, pretrained, sigmas, clips, np.full(len(sigmas), lr, np.float32),
        corpus.train)
    runs[kind] = _runs(cfg, kind, sigmas, trained, state, pretrained, corpus,
                       sampler)
    dims[kind] = sum(int(np.prod(a.shape[2:]))
                     for a in jax.tree.leaves(trained))
  return Results(dataset=dataset, corpus=corpus_info, steps=cfg.steps,
                 sampling_rate=sampler.sampling_rate,
                 pretrained_test_loss=pre_loss(corpus.test),
                 pretrained_public_loss=pre_loss(corpus.public[:1024]),
                 runs=runs, dimensions=dims)
