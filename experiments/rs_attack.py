"""Reconstruction error vs sparsification rate (Zhu & Blaschko, Thm 5.1, Fig. 5).

(a) Closed form (Thm 5.1): a one-input linear layer with gradient g = k x is
released as m * (k x + N(0, sigma^2 I)); the least-squares attacker's error
E||x - x_hat||^2 is compared with the bound sigma^2 / ((1 - r) ||k||^2).
(b) Inverting gradients (Geiping et al. 2020, the paper's Fig. 5 attack): one
digits image is reconstructed from the noisy, sparsified gradient of a sigmoid
MLP at initialization (label known), by cosine gradient matching on the
visible coordinates. The claim: reconstruction gets worse as r grows.
"""

import time
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import dpjax
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import train as train_lib

NAME = 'rs_attack'
DESCRIPTION = 'reconstruction attacks vs sparsification rate (Thm 5.1, Fig. 5)'
MODES = {
    'quick': dict(dataset='digits', num_images=8, trials=20000,
                  attack_steps=1000),
    'full': dict(dataset='digits', num_images=64, trials=200000,
                 attack_steps=3000),
}
DEFAULTS = dict(seed=0, rates=[0.0, 0.3, 0.5, 0.7, 0.9, 0.99], dim=100,
                sigma=1.0, gradient_noise=0.01, attack_lr=0.05, hidden=[64])


def config(mode: str, epsilons=None, delta=None, **overrides
           ) -> dict[str, Any]:
  if epsilons is not None or delta is not None:
    raise ValueError(f'{NAME} measures attacks at fixed noise; drop '
                     '--epsilons/--delta')
  cfg = dict(DEFAULTS, **MODES[mode], mode=mode)
  cfg.update({k: v for k, v in overrides.items() if v is not None})
  return cfg


def closed_form(cfg) -> list[dict[str, Any]]:
  """Measured least-squares error vs the Thm 5.1 bound, per rate."""
  key = jax.random.key(cfg['seed'])
  k = jax.random.normal(jax.random.fold_in(key, 0), (cfg['dim'],))
  x, sigma, rows = 1.0, cfg['sigma'], []
  for rate in cfg['rates']:
    zeros = int(rate * cfg['dim'])

    def trial(key, zeros=zeros):
      mkey, nkey = jax.random.split(key)
      m = dpjax.transforms.sparsity_mask(mkey, 0, k, dpjax.transforms.SparsityMaskSchedule(
          np.array([zeros]), 1, 1))
      released = m * (k * x + sigma * jax.random.normal(nkey, k.shape))
      return (dpjax.audit.least_squares_reconstruction(released, m, k)
              - x) ** 2

    err = np.asarray(jax.jit(jax.vmap(trial))(jax.random.split(
        jax.random.fold_in(key, 1), cfg['trials'])))
    rows.append(dict(rate=rate, mse=float(err.mean()),
                     sem=float(err.std() / np.sqrt(err.size)),
                     bound=float(dpjax.audit.reconstruction_error_bound(
                         sigma, rate, k))))
  return rows


def inversion(cfg, ds) -> list[dict[str, Any]]:
  """Gradient-inversion MSE per rate (and noiseless dense as a reference)."""
  model = models.make_model('mlp', ds.num_classes, input_shape=ds.input_shape,
                            hidden=tuple(cfg['hidden']), activation='sigmoid')
  key = jax.random.key(cfg['seed'])
  params = model.init(jax.random.fold_in(key, 0), ds.x_test[0])
  loss = train_lib.per_example_loss(model, ds.task)
  d = sum(p.size for p in jax.tree.leaves(params))

  @jax.jit
  def attack(x, y, rate_zeros, noise_std, key):
    lf = lambda p, xx: loss(p, (xx, y))
    grad = jax.grad(lf)(params, x)
    mkey, nkey, akey = jax.random.split(key, 3)
    m = dpjax.transforms.sparsity_mask(mkey, 0, grad, dpjax.transforms.SparsityMaskSchedule(
        rate_zeros[None], 1, 1))
    leaves, treedef = jax.tree.flatten(grad)
    noise = treedef.unflatten([
        noise_std * jax.random.normal(k, g.shape)
        for k, g in zip(jax.random.split(nkey, len(leaves)), leaves)])
    observed = jax.tree.map(lambda g, n, mm: mm * (g + n), grad, noise, m)
    x_hat = dpjax.audit.invert_gradients(
        lf, params, observed, x, key=akey, steps=cfg['attack_steps'],
        learning_rate=cfg['attack_lr'], visible=m)
    return jnp.mean((x_hat - x) ** 2)

  settings = [('no noise', 0.0, 0.0)] + [
      ('noisy', rate, cfg['gradient_noise']) for rate in cfg['rates']]
  rows = []
  for name, rate, noise_std in settings:
    mses = [float(attack(jnp.asarray(ds.x_test[i]), jnp.asarray(ds.y_test[i]),
                         jnp.int32(int(rate * d)), jnp.float32(noise_std),
                         jax.random.fold_in(key, 100 + i)))
            for i in range(cfg['num_images'])]
    rows.append(dict(setting=name, rate=rate, noise_std=noise_std,
                     mse_mean=float(np.mean(mses)),
                     mse_std=float(np.std(mses)), images=len(mses)))
  return rows


def run(cfg: dict[str, Any], out_dir: str, progress: bool = True
        ) -> dict[str, Any]:
  del out_dir, progress
  start = time.time()
  ds = data_lib.load(cfg['dataset'], seed=cfg['seed'])
  return dict(experiment=NAME, config=cfg, dataset=report_lib.dataset_info(ds),
              closed_form=closed_form(cfg), inversion=inversion(cfg, ds),
              wall_seconds=round(time.time() - start, 1))


def plot(results: dict[str, Any], out_dir: str) -> list[str]:
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
  cf = results['closed_form']
  axes[0].errorbar([r['rate'] for r in cf], [r['mse'] for r in cf],
                   yerr=[r['sem'] for r in cf], marker='o', label='measured')
  axes[0].plot([r['rate'] for r in cf], [r['bound'] for r in cf], 'k--',
               label='Thm 5.1 bound')
  axes[0].set_title('least squares, linear layer')
  inv = [r for r in results['inversion'] if r['setting'] == 'noisy']
  axes[1].errorbar([r['rate'] for r in inv], [r['mse_mean'] for r in inv],
                   yerr=[r['mse_std'] for r in inv], marker='o',
                   label=f"noise std {inv[0]['noise_std']:g}")
  ref = next(r for r in results['inversion'] if r['setting'] == 'no noise')
  axes[1].axhline(ref['mse_mean'], color='r', ls='--', label='no noise, dense')
  axes[1].set_title('inverting gradients, digits MLP')
  for ax in axes:
    ax.set_xlabel('sparsification rate r')
    ax.set_ylabel('reconstruction MSE')
    ax.set_yscale('log')
    ax.legend(fontsize=7)
  return [report_lib.save_figure(fig, out_dir, 'reconstruction_vs_rate.png')]


def report(results: dict[str, Any], out_dir: str) -> str:
  cfg = results['config']
  pngs = plot(results, out_dir)
  cf, inv = results['closed_form'], results['inversion']
  above = all(r['mse'] >= r['bound'] - 3 * r['sem'] for r in cf)
  noisy = [r['mse_mean'] for r in inv if r['setting'] == 'noisy']
  rising = all(b >= a for a, b in zip(noisy, noisy[1:]))
  lines = [
      f'## {NAME} ({cfg["mode"]})', '',
      report_lib.dataset_line(results['dataset']), '',
      f"(a) Least squares on a one-input linear layer, d = {cfg['dim']}, "
      f"sigma = {cfg['sigma']}, {cfg['trials']} trials per rate:", '',
      report_lib.markdown_table(cf, [('rate', 'r'), ('mse', 'E[(x - x_hat)^2]'),
                                     ('sem', 'SEM'), ('bound', 'Thm 5.1 bound')]),
      '',
      f"(b) Inverting gradients on {cfg['num_images']} test images, MLP "
      f"{cfg['hidden']} sigmoid at init, {cfg['attack_steps']} Adam steps:", '',
      report_lib.markdown_table(inv, [('setting', 'setting'), ('rate', 'r'),
                                      ('noise_std', 'noise std'),
                                      ('mse_mean', 'MSE'), ('mse_std', 'std'),
                                      ('images', 'images')]), '',
      f"- Measured error at or above the Thm 5.1 bound at every r: "
      f"**{'yes' if above else 'no'}**.",
      f"- Inversion error non-decreasing in r at fixed noise: "
      f"**{'yes' if rising else 'no'}**.", '']
  lines += [f'![{p}]({p})' for p in pngs]
  return '\n'.join(lines) + '\n'
