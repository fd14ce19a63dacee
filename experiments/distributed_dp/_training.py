"""distributed_dp's federated training: test accuracy vs bits on digits.

Every protocol runs on the shared federated loop
(``experiments.common.federated``): each round ``n`` clients send the
gradient of their shard's mean loss, the protocol returns an estimate of
the mean of the clipped gradients, and the server takes an SGD step with
momentum. All protocols of a run meet the same total (epsilon, delta) over
its T rounds (replace-one client, the server sees only the sum, no
amplification by subsampling):

* DDG and Skellam at b bits: ``calibrate_distributed_dp`` for the total
  (epsilon, delta) over T rounds, the protocol ``distributed_dp_protocol``
  (its round ``secure_sum_round``, decoded sum / n; its bits
  ``distributed_dp_bits``), its event ``distributed_dp_event`` with
  ``replace_one=True`` (RDP, composed T times by the ledger);
* cpSGD with rotation, as in cpsgd_training (``cpsgd_protocol``, its event
  ``cpsgd_event`` at delta_round = delta / (2 T), PLD composition):
  the per-round epsilon is the largest whose T-fold PLD composition meets
  the total; per k, the smallest m meeting it (Theorem 1); at b bits, the
  k of smallest analytic MSE bound among those whose sum of n messages in
  {0..k-1+m} fits b bits. Where none fits any b of the sweep, cpSGD also
  runs once at the fewest bits where it fits (up to 31);
* the Gaussian protocol (32-bit floats), as in cpsgd_training
  (``gaussian_distributed_mean_protocol``), its stddev the exact one for T
  Gaussian releases at the total (epsilon, delta)
  (``accounting.gaussian_stddev``).

Wrap-around: the loop sees only the estimate, so the DDG and Skellam runs
share one mean (a ``lax.switch`` on the configuration, one compilation)
that calls ``secure_sum_round`` itself, and each round reports (wrap-around
rate, rounding failures, flagged) to the host through
``jax.debug.callback``. A flagged round (wrap-around rate above
``max_wraparound_rate``) still updates the model, as it would in a
deployment (the server cannot see wrap-around), and is counted per seed.
"""

import math
import time
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import accounting
from dpjax import compression
from dpjax import distributed as dist
from experiments.common import data as data_lib
from experiments.common import federated
from experiments.common import models
from experiments.common import report as report_lib
from experiments.distributed_dp import _claims
from experiments.distributed_dp._results import Training

MAX_CPSGD_BITS = 31  # the int32 sum of the messages


def training_seeds(cfg) -> list[int]:
  return list(range(cfg.seed, cfg.seed + cfg.train_num_seeds))


def delta_round(cfg) -> float:
  """cpSGD's per-round delta: delta / (2 T), the other half PLD slack."""
  return cfg.delta / (2 * cfg.train_rounds)


def _cpsgd_total(event, cfg) -> float:
  ledger = accounting.PrivacyLedger()
  ledger.record(event, count=cfg.train_rounds, planned=True)  # a plan
  return float(ledger.epsilon(cfg.delta, 'pld'))


def cpsgd_round_epsilon(cfg) -> float:
  """The largest per-round epsilon (at delta_round) whose T-fold PLD
  composition stays within the total target (bisection, 30 steps)."""
  target, dr = cfg.train_epsilon, delta_round(cfg)
  lo, hi = 0.0, target

  def total(e):
    return _cpsgd_total(accounting.EpsilonDeltaDpEvent(e, dr), cfg)

  for _ in range(30):
    mid = (lo + hi) / 2
    if total(mid) <= target:
      lo = mid
    else:
      hi = mid
  return lo


def cpsgd_candidates(cfg, d: int, n: int) -> list[dict[str, Any]]:
  """Per k: the smallest m meeting the per-round epsilon, its sum bits."""
  dr, clip = delta_round(cfg), cfg.train_l2_norm_clip
  eps_r = cpsgd_round_epsilon(cfg)
  linf = dist.rotated_linf_clip(clip, d, n, dr)
  out = []
  for k in cfg.levels:

    def make(m, k=k):
      return dist.CpsgdConfig(l2_norm_clip=clip, levels=k, trials=m,
                              p=cfg.p, linf_clip=linf, rotate=True)

    def event(m, make=make):
      try:
        return dist.cpsgd_event(make(m), d, n, dr)
      except ValueError as e:
        if 'Theorem 1 needs' not in str(e):
          raise
        return dp_accounting.NonPrivateDpEvent()

    try:
      m = accounting.calibrate(event, eps_r, dr, start=1,
                               ceiling=(2**31 - 1) // n - k)
    except ValueError:
      continue
    config = make(m)
    out.append(dict(levels=k, trials=m, config=config,
                    sum_bits=(n * config.max_message).bit_length(),
                    bound=dist.cpsgd_mse_bound(d, n, k, m, config.binomial_p,
                                               config.linf_clip)))
  return out


def cpsgd_choice(candidates, bits: int):
  fits = [c for c in candidates if c['sum_bits'] <= bits]
  return min(fits, key=lambda c: c['bound']) if fits else None


def _ddp_switch_mean(configs: tuple, max_rate: float, sink) -> federated.Mean:
  """One mean for every DDG / Skellam configuration (``param``: the index),
  so that the loop compiles one trainer for all of them. Its estimate is
  that of the configuration's ``distributed_dp_protocol`` (the round's
  ``secure_sum_round``); each round's wrap-around, rounding failures and
  flag go to ``sink`` on the host."""

  def branch(config):
    def run(key, vectors):
      r = dist.secure_sum_round(config, key, vectors,
                                max_wraparound_rate=max_rate)
      return (r.estimate, r.wraparound_rate,
              r.rounding_failures.astype(jnp.int32), r.accepted)
    return run

  branches = [branch(c) for c in configs]

  def mean(key, vectors, param):
    index = jnp.asarray(param).astype(jnp.int32)
    est, rate, failures, accepted = jax.lax.switch(index, branches, key,
                                                   vectors)
    jax.debug.callback(sink, rate, failures, accepted, ordered=False)
    return est

  return mean


class _RoundSink:
  """Host-side record of the rounds' wrap-around (filled by callbacks)."""

  def __init__(self):
    self.records = []

  def __call__(self, rate, failures, accepted):
    self.records.append((np.asarray(rate).ravel(),
                         np.asarray(failures).ravel(),
                         np.asarray(accepted).ravel()))

  def take(self, num_seeds: int, rounds: int) -> dict[str, Any]:
    """Per seed: flagged rounds, max wrap-around, rounding failures."""
    rate = np.concatenate([r[0] for r in self.records])
    fail = np.concatenate([r[1] for r in self.records])
    acc = np.concatenate([r[2] for r in self.records])
    self.records = []
    if rate.size != num_seeds * rounds:
      raise ValueError(f'expected {num_seeds * rounds} round records, got '
                       f'{rate.size}')
    # vmap over seeds calls back per seed in batch order, round by round
    shape = (rounds, num_seeds)
    rate, fail, acc = (a.reshape(shape) for a in (rate, fail, acc))
    return dict(flagged=(~acc).sum(0).astype(int).tolist(),
                wraparound_max=rate.max(0).astype(float).tolist(),
                rounding_failures=fail.sum(0).astype(int).tolist())


def _ddp_setting(cfg, mech: str, bits: int, d: int, n: int):
  """DDG or Skellam at b bits, calibrated for the run's total: (setting,
  config or None where it cannot run); the protocol is the library's,
  accounted replace-one as every protocol here."""
  row = dict(setting=f'{_LABEL[mech]} b={bits}', method=mech, bits=bits)
  clip = cfg.train_l2_norm_clip
  try:
    config = dist.calibrate_distributed_dp(
        mech, epsilon=cfg.train_epsilon, delta=cfg.delta, num_clients=n,
        dimension=d, bits=bits, l2_norm_clip=clip, rounds=cfg.train_rounds,
        k_stddevs=cfg.k_stddevs, replace_one=True)
  except ValueError as e:
    return dict(row, note=f'not calibrated: {e}'), None
  if mech == 'skellam' and config.local_mu > dist.MAX_SKELLAM_MU:
    return dict(row, note=f'local mu = {config.local_mu:.3g} above the '
                'Skellam sampler range (2^22)'), None
  # The run's unit is replace-one (as cpSGD's and the Gaussian's), as
  # calibrated above.
  protocol = dist.distributed_dp_protocol(config, d, replace_one=True)
  return dict(row, protocol=protocol, event=protocol.event,
              gamma=config.gamma,
              stddev=config.stddev,
              noise_multiplier=config.stddev / (2 * clip),
              bits_per_client=protocol.bits_per_client), config


def _ddp_settings(cfg, d: int, n: int) -> tuple[list, tuple]:
  """Every DDG / Skellam setting, and the configs of those that run (a
  runnable setting's ``index`` is its config's)."""
  settings, configs = [], []
  for bits in cfg.train_bits:
    for mech in ('ddg', 'skellam'):
      setting, config = _ddp_setting(cfg, mech, bits, d, n)
      if config is not None:
        setting['index'] = len(configs)
        configs.append(config)
      settings.append(setting)
  return settings, tuple(configs)


def _cpsgd_settings(cfg, candidates, d: int, n: int) -> list[dict[str, Any]]:
  """cpSGD at every b of the sweep (the candidate of smallest bound that
  fits), and at the fewest bits where it fits if it fits none of them."""
  cp_bits = list(cfg.train_bits)
  if candidates and all(cpsgd_choice(candidates, b) is None
                        for b in cp_bits):
    fewest = min(c['sum_bits'] for c in candidates)
    if fewest <= MAX_CPSGD_BITS:
      cp_bits.append(fewest)
  settings = []
  for bits in cp_bits:
    row = dict(setting=f'cpSGD b={bits}', method='cpsgd', bits=bits,
               extra=bits not in cfg.train_bits)
    c = cpsgd_choice(candidates, bits)
    if c is None:
      settings.append(dict(row, note='no k fits a b-bit secure sum at this '
                           'epsilon'))
      continue
    protocol = dist.cpsgd_protocol(c['config'], d, n, delta_round(cfg))
    settings.append(dict(
        row, protocol=protocol, event=protocol.event, levels=c['levels'],
        trials=c['trials'], sum_bits=c['sum_bits'],
        epsilon_round=float(protocol.event.epsilon),
        bits_per_client=protocol.bits_per_client))
  return settings


def _gaussian_setting(cfg, d: int, n: int) -> dict[str, Any]:
  """The Gaussian protocol at the exact stddev for T releases."""
  rounds, clip, delta = cfg.train_rounds, cfg.train_l2_norm_clip, cfg.delta
  sigma_sum = accounting.gaussian_stddev(cfg.train_epsilon, delta, 2 * clip,
                                         rounds)
  client_stddev = sigma_sum / math.sqrt(n)
  protocol = dist.gaussian_distributed_mean_protocol(clip, client_stddev, n,
                                                     d)
  return dict(
      setting='Gaussian (32 bits)', method='gaussian', bits=32,
      client_stddev=client_stddev, stddev=sigma_sum,
      noise_multiplier=sigma_sum / (2 * clip), protocol=protocol,
      event=protocol.event,
      epsilon_exact=accounting.gaussian_epsilon(sigma_sum, 2 * clip, delta,
                                                rounds),
      bits_per_client=protocol.bits_per_client)


def plan_settings(cfg, d: int, n: int) -> dict[str, Any]:
  """Every protocol's privacy and bits (no training): the settings, each
  runnable one with its library ``protocol`` and its ``event``."""
  settings, ddp_configs = _ddp_settings(cfg, d, n)
  candidates = cpsgd_candidates(cfg, d, n)
  settings += _cpsgd_settings(cfg, candidates, d, n)
  settings.append(_gaussian_setting(cfg, d, n))
  return dict(settings=settings, ddp_configs=ddp_configs,
              cpsgd_candidates=[{k: v for k, v in c.items()
                                 if k != 'config'} for c in candidates],
              cpsgd_epsilon_round=cpsgd_round_epsilon(cfg))


_LABEL = {'ddg': 'DDG', 'skellam': 'Skellam'}


def _load(cfg):
  """The training data and the model."""
  ds = data_lib.load(cfg.train_dataset, seed=cfg.seed,
                     fallback=cfg.allow_fallback)
  if ds.task != 'classification':
    raise ValueError(f"train_dataset={cfg.train_dataset!r} is not a "
                     'classification dataset')
  return ds, models.make_model(cfg.train_model, ds.num_classes,
                               input_shape=ds.input_shape)


def _to_run(cfg, the_plan, sink) -> list[dist.Protocol | None]:
  """Per setting, the protocol that runs (None: not runnable): DDG and
  Skellam share one switched mean whose rounds report to ``sink``."""
  ddp_mean = (_ddp_switch_mean(the_plan['ddp_configs'],
                               float(cfg.max_wraparound_rate), sink)
              if the_plan['ddp_configs'] else None)
  out = []
  for s in the_plan['settings']:
    protocol = s.get('protocol')
    if protocol is not None and s['method'] in _LABEL:
      protocol = protocol._replace(mean=ddp_mean, param=float(s['index']))
    out.append(protocol)
  return out


def _train(cfg, loop, clients, s, protocol, sink) -> dict[str, Any]:
  """Setting ``s``'s row: its privacy, the ledger's total, the final test
  accuracy per seed and, for DDG / Skellam, the flagged rounds."""
  t0 = time.time()
  row = {k: v for k, v in s.items() if k not in ('protocol', 'event')}
  curves, ledger = loop.run(clients, protocol)
  row['epsilon_total'] = float(ledger.epsilon(
      cfg.delta, 'rdp' if s['method'] in _LABEL else 'pld'))
  row['bits_per_client_total'] = ledger.bits
  if s['method'] in _LABEL:
    jax.effects_barrier()  # every round's callback has reached the sink
    row.update(sink.take(len(clients.keys), cfg.train_rounds))
  acc = np.asarray(curves['test_accuracy'])[:, -1]
  row.update(test_accuracy=float(acc.mean()),
             test_accuracy_sem=(float(acc.std(ddof=1) / math.sqrt(acc.size))
                                if acc.size > 1 else None),
             per_seed=acc.astype(float).tolist(),
             clipped_fraction=float(np.mean(curves['clipped_fraction'])),
             seconds=round(time.time() - t0, 1))
  return row


def run_training(cfg, say) -> Training:
  """Trains every setting on every seed; rows per setting and seed
  (``say``: a progress line). The claims are ``_claims.claims``'s."""
  start = time.time()
  ds, model = _load(cfg)
  seeds = training_seeds(cfg)
  n = cfg.train_clients_per_round or cfg.train_num_clients
  clients = federated.init_clients(model, ds, seeds, cfg.train_num_clients)
  d = clients.dimension
  the_plan = plan_settings(cfg, d, n)  # privacy only, before training
  loop = federated.FederatedLoop(
      model, ds, num_clients=cfg.train_num_clients, clients_per_round=n,
      rounds=cfg.train_rounds, learning_rate=cfg.train_learning_rate,
      momentum=cfg.train_momentum, l2_norm_clip=cfg.train_l2_norm_clip)
  sink = _RoundSink()
  claim_plan = _claims.training_plan(cfg, the_plan['settings'])
  rows = []
  for s, protocol in zip(the_plan['settings'], _to_run(cfg, the_plan, sink)):
    if protocol is None:  # not runnable (noted)
      rows.append(dict(s, test_accuracy=None))
      continue
    rows.append(_train(cfg, loop, clients, s, protocol, sink))
    say(f"training {s['setting']}: test acc {rows[-1]['test_accuracy']:.4f} "
        f"({rows[-1]['seconds']:.1f} s)")
  return Training(dataset=report_lib.dataset_info(ds), seeds=seeds,
                  dimension=d,
                  padded_dimension=compression.next_power_of_two(d),
                  clients_per_round=n, num_clients=cfg.train_num_clients,
                  delta_round=delta_round(cfg),
                  cpsgd_epsilon_round=the_plan['cpsgd_epsilon_round'],
                  cpsgd_candidates=the_plan['cpsgd_candidates'], rows=rows,
                  plan=claim_plan,
                  wall_seconds=round(time.time() - start, 1))
