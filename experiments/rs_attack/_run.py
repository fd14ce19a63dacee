"""rs_attack's run: (a) the closed-form least-squares attack, (b) inverting
gradients, every seed and rate."""

import jax
import jax.numpy as jnp
import numpy as np

import dpjax
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.rs_attack._config import Config
from experiments.rs_attack._results import ClosedForm
from experiments.rs_attack._results import Inversion
from experiments.rs_attack._results import Results


def _mask(key, like, zeros):
  """The mask random sparsification applies at step 0 (``zeros`` zeroed)."""
  sparsify = dpjax.transforms.sparsify_random(
      dpjax.transforms.SparsityMaskSchedule(
          jnp.asarray(zeros, jnp.int32)[None], 1, 1), key=key)
  return dpjax.transforms.next_sparsity_mask(sparsify.init(like))


def closed_form(cfg: Config, seeds) -> ClosedForm:
  """Per seed and rate: the least-squares attack's mean squared error (over
  ``num_trials`` draws of mask and noise), its SEM and the Thm 5.1 bound."""
  dim, sigma, x = cfg.dimension, cfg.closed_form_stddev, 1.0
  zeros = [int(r * dim) for r in cfg.rates]
  chunk = min(cfg.trial_chunk, cfg.num_trials)
  chunks = max(cfg.num_trials // chunk, 1)

  def trial(k, key):  # every rate sees the same mask key and noise
    mkey, nkey = jax.random.split(key)
    noise = sigma * jax.random.normal(nkey, k.shape)
    errs = []
    for z in zeros:
      m = _mask(mkey, k, z)
      est = dpjax.audit.least_squares_reconstruction(m * (k * x + noise), m, k)
      errs.append((est - x) ** 2)
    return jnp.stack(errs)

  def one_seed(key):
    k = jax.random.normal(jax.random.fold_in(key, 0), (dim,))
    keys = jax.random.split(jax.random.fold_in(key, 1), chunks * chunk)

    def body(acc, chunk_keys):
      err = jax.vmap(trial, (None, 0))(k, chunk_keys)
      return (acc[0] + err.sum(0), acc[1] + jnp.square(err).sum(0)), None

    init = (jnp.zeros(len(zeros)), jnp.zeros(len(zeros)))
    (total, sq), _ = jax.lax.scan(body, init,
                                  keys.reshape(chunks, chunk))
    return k, total, sq

  keys = jax.vmap(jax.random.key)(jnp.asarray(seeds, jnp.uint32))
  k, total, sq = jax.jit(jax.vmap(one_seed))(keys)
  n = chunks * chunk
  total, sq = np.asarray(total, np.float64), np.asarray(sq, np.float64)
  mse = total / n
  sem = np.sqrt(np.maximum(sq / n - mse ** 2, 0.0) / (n - 1)) if n > 1 else (
      np.zeros_like(mse))
  bound = np.asarray([[float(dpjax.audit.reconstruction_error_bound(
      sigma, z / dim, ks)) for z in zeros] for ks in np.asarray(k)])
  return ClosedForm(trials=n, zeros=zeros, rates=list(cfg.rates),
                    mse=mse.tolist(), sem=sem.tolist(), bound=bound.tolist())


def inversion(cfg: Config, ds, seeds) -> Inversion:
  """Gradient-inversion MSE [seeds, images, settings]; setting 0 is the
  noiseless dense reference, then one noisy setting per rate."""
  model = models.make_model('mlp', ds.num_classes, input_shape=ds.input_shape,
                            hidden=cfg.hidden, activation='sigmoid')
  loss = train_lib.per_example_loss(model, ds.task)
  keys = jax.vmap(jax.random.key)(jnp.asarray(seeds, jnp.uint32))
  params = jax.vmap(lambda k: model.init(jax.random.fold_in(k, 0),
                                         ds.x_test[0]))(keys)
  d = sum(p.size for p in jax.tree.leaves(params)) // len(seeds)
  idx = np.stack([np.random.default_rng(s).choice(
      len(ds.x_test), cfg.num_images, replace=False) for s in seeds])
  xs, ys = jnp.asarray(ds.x_test[idx]), jnp.asarray(ds.y_test[idx])
  image_keys = jax.vmap(lambda k: jax.random.split(
      jax.random.fold_in(k, 1), cfg.num_images))(keys)
  rates = [0.0] + list(cfg.rates)
  stds = [0.0] + [cfg.inversion_stddev] * len(cfg.rates)
  zeros = jnp.asarray([int(r * d) for r in rates], jnp.int32)

  def attack(params, x, y, key, zeros, noise_std):
    lf = lambda p, xx: loss(p, (xx, y))
    grad = jax.grad(lf)(params, x)
    mkey, nkey, akey = jax.random.split(key, 3)
    m = _mask(mkey, grad, zeros)
    leaves, treedef = jax.tree.flatten(grad)
    noise = treedef.unflatten([
        noise_std * jax.random.normal(k, g.shape)
        for k, g in zip(jax.random.split(nkey, len(leaves)), leaves)])
    observed = jax.tree.map(lambda g, n, mm: mm * (g + n), grad, noise, m)
    x_hat = dpjax.audit.invert_gradients(
        lf, params, observed, x, key=akey, steps=cfg.attack_steps,
        learning_rate=cfg.attack_learning_rate, visible=m)
    return jnp.mean((x_hat - x) ** 2)

  # One flat vmap over (seed, image, setting) lanes: nested vmaps compile
  # about 3x slower here.
  s, i, j = np.meshgrid(np.arange(len(seeds)), np.arange(cfg.num_images),
                        np.arange(len(rates)), indexing='ij')
  s, i, j = s.ravel(), i.ravel(), j.ravel()
  lanes = jax.jit(jax.vmap(attack))(
      jax.tree.map(lambda p: p[s], params), xs[s, i], ys[s, i],
      image_keys[s, i], zeros[j], jnp.asarray(stds, jnp.float32)[j])
  mse = np.asarray(lanes).reshape(len(seeds), cfg.num_images, len(rates))
  return Inversion(settings=['no noise'] + ['noisy'] * len(cfg.rates),
                   rates=rates, noise_std=stds, params=d, images=idx.tolist(),
                   mse=np.asarray(mse, np.float64).tolist())


def run(cfg: Config, ctx: runner.Context) -> Results:
  """(a) and (b) for every seed and rate; returns the numbers."""
  del ctx
  ds = data_lib.load(cfg.dataset, seed=cfg.seed, fallback=cfg.allow_fallback)
  return Results(dataset=report_lib.dataset_info(ds),
                 closed_form=closed_form(cfg, cfg.seeds),
                 inversion=inversion(cfg, ds, cfg.seeds))
