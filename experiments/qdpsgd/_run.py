"""qdpsgd's run: every algorithm on one gossip graph, seeds vmapped.

Per scenario (agents n, expected batch B) one Erdos-Renyi graph G(n, p_c)
is drawn from the experiment seed (redrawn until connected); the training
records are split at random into n equal shards per seed. Every seed s has
its own model init ``fold_in(key(s), 0)``, shards and run key
``fold_in(key(s), 1)``; round t uses ``fold_in(run key, t)``, split into a
batch key and the algorithm's key, so all algorithms see the same speeds.

Q-DPSGD-1/2 use deadline batches (``DeadlineSampler``: |S| = floor(V T_d),
V ~ Uniform(10, 90), T_d = B / E[V]); DSGD and SDM wait for every agent to
finish a fixed batch of B, which takes max_i B / V_i. Simulated round time
is that compute time plus T_c x (bits sent by the busiest agent) / (16 p).
Noise is calibrated per algorithm and epsilon to the sound accounting, on
the batch sizes every seed will draw (public randomness), so that each
seed's run spends at most the target.
"""

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import compression
from dpjax import distributed as dd
from dpjax import sampling
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import report as report_lib
from experiments.common import row_cache
from experiments.common import runner
from experiments.common import train as train_lib
from experiments.qdpsgd._claims import label
from experiments.qdpsgd._claims import plan
from experiments.qdpsgd._config import Config
from experiments.qdpsgd._config import eta_at
from experiments.qdpsgd._config import step_sizes
from experiments.qdpsgd._results import Results
from experiments.qdpsgd._results import ScenarioRuns


def connected_graph(seed: int, n: int, p: float) -> np.ndarray:
  """G(n, p) from ``key(seed)``, redrawn with ``fold_in`` until connected."""
  for attempt in range(1000):
    a = dd.erdos_renyi(jax.random.fold_in(jax.random.key(seed), attempt), n, p)
    if dd.num_components(a) == 1:
      return a
  raise ValueError(f'G({n}, {p}) was disconnected in 1000 draws; raise '
                   'edge_probability')


class Scenario:
  """Data, model, graph and samplers of one (agents, batch size) setting."""

  def __init__(self, cfg, ds, n: int, batch: float):
    self.n, self.batch = n, batch
    self.model = models.make_model('mlp', ds.num_classes,
                                   input_shape=ds.input_shape,
                                   hidden=(cfg.hidden,),
                                   activation='sigmoid')
    self.loss_fn = train_lib.per_example_loss(self.model, 'classification')
    records = min(cfg.num_train_examples, len(ds.x_train))
    self.m = records // n
    if self.m < 1:
      raise ValueError(f'{n} agents need at least {n} training records')
    self.records = records
    self.adjacency = connected_graph(cfg.seed, n, cfg.edge_probability)
    lam_max = float(np.linalg.eigvalsh(dd.laplacian(self.adjacency))[-1])
    # kappa = lambda_max(L): every eigenvalue of W in [0, 1). With the
    # fastest-mixing default some are negative, and SDM's 1/c-scaled
    # sparsified steps diverged (NaN on digits).
    self.mixing = dd.mixing_matrix(self.adjacency, kappa=lam_max)
    self.gap = dd.spectral_gap(self.mixing)
    self.deadline = sampling.DeadlineSampler(self.m, batch)
    self.fixed = int(round(batch))
    if not 1 <= self.fixed <= self.m:
      raise ValueError(f'batch size {batch} must be in [1, m={self.m}]')
    self.seeds = cfg.seeds
    x0 = jnp.asarray(ds.x_train[:1])
    params = [self.model.init(jax.random.fold_in(jax.random.key(s), 0), x0)
              for s in self.seeds]
    self.params0 = jax.tree.map(lambda *a: jnp.stack(a), *params)
    self.dimension = models.num_params(params[0])
    self.shards = jnp.asarray(np.stack([
        np.random.default_rng(s).permutation(len(ds.x_train))[
            :n * self.m].reshape(n, self.m) for s in self.seeds]), jnp.int32)
    self.keys = jnp.stack([jax.random.fold_in(jax.random.key(s), 1)
                           for s in self.seeds])
    self.rounds = cfg.rounds
    self.every = max(1, cfg.rounds // cfg.num_evals)
    self.eval_rounds = eval_rounds(cfg)
    self.x_tr, self.y_tr = jnp.asarray(ds.x_train), jnp.asarray(ds.y_train)
    self.x_te, self.y_te = jnp.asarray(ds.x_test), jnp.asarray(ds.y_test)

  def round_keys(self, key, t):
    return jax.random.split(jax.random.fold_in(key, t))

  def deadline_sizes(self) -> np.ndarray:
    """|S_{t,i}| of every seed: [seeds, rounds, agents] (drawn in advance)."""
    def sizes(key):
      return jax.vmap(lambda t: self.deadline.batch_sizes(
          self.round_keys(key, t)[0], self.n))(jnp.arange(self.rounds))
    return np.asarray(jax.jit(jax.vmap(sizes))(self.keys))

  def trainer(self, alg, deadline: bool):
    """jit(vmap over seeds) of a whole run: per-round curves [S, T]."""
    n, fixed, m = self.n, self.fixed, self.m
    x_tr, y_tr, x_te, y_te = self.x_tr, self.y_tr, self.x_te, self.y_te
    loss_fn, model = self.loss_fn, self.model

    def evaluate(params):
      mean = jax.tree.map(lambda p: jnp.mean(p, axis=0), params)
      loss = jnp.mean(jax.vmap(loss_fn, in_axes=(None, 0))(mean, (x_tr, y_tr)))
      pred = jnp.argmax(model.apply(mean, x_te), axis=-1)
      return loss, jnp.mean((pred == y_te).astype(jnp.float32))

    def one(key, params0, shard, hyper):
      state = alg.init(params0)

      def step(state, t):
        k_batch, k_alg = self.round_keys(key, t)
        speeds = self.deadline.speeds(k_batch, n)
        if deadline:
          b = self.deadline.sample(k_batch, n)
          idx, mask = b.indices, b.mask
          compute = jnp.float32(self.deadline.time)
        else:
          keys = jax.random.split(jax.random.split(k_batch)[1], n)
          idx = jax.vmap(lambda k: jax.random.choice(
              k, m, (fixed,), replace=False))(keys).astype(jnp.int32)
          mask = jnp.ones((n, fixed), bool)
          compute = jnp.max(fixed / jnp.maximum(speeds, 1e-6))
        rows = jnp.take_along_axis(shard, idx, axis=1)
        batch = dd.AgentBatch((x_tr[rows], y_tr[rows]), mask)
        state, met = alg.round(state, k_alg, batch, hyper)
        return state, dict(consensus=met.consensus, batch_size=met.batch_size,
                           bits=met.bits, compute_time=compute,
                           noise_multiplier=met.noise_multiplier)

      every, blocks = self.every, self.rounds // self.every

      def block(state, ts):
        state, per_round = jax.lax.scan(step, state, ts)
        loss, acc = evaluate(state.params)
        return state, (per_round, loss, acc)

      ts = jnp.arange(self.rounds)
      state, (per_round, loss, acc) = jax.lax.scan(
          block, state, ts[:blocks * every].reshape(blocks, every))
      per_round = jax.tree.map(
          lambda v: v.reshape((blocks * every,) + v.shape[2:]), per_round)
      if blocks * every < self.rounds:  # the last, shorter block
        state, tail = jax.lax.scan(step, state, ts[blocks * every:])
        last_loss, last_acc = evaluate(state.params)
        per_round = jax.tree.map(lambda a, b: jnp.concatenate([a, b]),
                                 per_round, tail)
        loss = jnp.concatenate([loss, last_loss[None]])
        acc = jnp.concatenate([acc, last_acc[None]])
      return dict(per_round, loss=loss, test_accuracy=acc)

    if alg.name == 'qdpsgd2':  # exact sampler: sequential seeds are faster
      return jax.jit(lambda k, p, s, h: jax.lax.map(
          lambda a: one(*a, h), (k, p, s)))
    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None)))


def privacy_setting(cfg, sc: Scenario, algorithm: str, sigma: float,
                    copies: int = 1, bits: int | None = None
                    ) -> dd.DecentralizedPrivacy:
  """The run's privacy setting; ``copies`` tiles the agents (seeds stacked)."""
  alpha, rate = step_sizes(cfg)
  return dd.DecentralizedPrivacy(
      algorithm, sigma, cfg.l2_norm_clip, sc.m, alpha, rate,
      eta_at(cfg, cfg.bits if bits is None else bits), sc.dimension,
      tuple(float(w) for w in np.diag(sc.mixing)) * copies, cfg.amplified)


def make_algorithm(cfg, sc: Scenario, algorithm: str, sigma: float,
                   bits: int):
  alpha, rate = step_sizes(cfg)
  clip = cfg.l2_norm_clip
  quantizer = compression.low_precision_quantizer(eta_at(cfg, bits), bits)
  if algorithm == 'qdpsgd1':
    return dd.qdpsgd1(sc.loss_fn, sc.mixing, l2_norm_clip=clip,
                      noise_multiplier=sigma, learning_rate=alpha,
                      mixing_rate=rate, quantizer=quantizer,
                      clip_method=cfg.clip_method)
  if algorithm == 'qdpsgd2':
    return dd.qdpsgd2(sc.loss_fn, sc.mixing, l2_norm_clip=clip,
                      noise_multiplier=sigma, learning_rate=alpha,
                      mixing_rate=rate, quantizer=quantizer,
                      clip_method=cfg.clip_method)
  if algorithm == 'sdm':
    return dd.sdm(sc.loss_fn, sc.mixing, l2_norm_clip=clip,
                  noise_multiplier=sigma,
                  learning_rate=cfg.baseline_learning_rate,
                  theta=cfg.theta, rate=cfg.sdm_rate,
                  clip_method=cfg.clip_method)
  return dd.dsgd(sc.loss_fn, sc.mixing,
                 learning_rate=cfg.baseline_learning_rate)


def settings(cfg: Config) -> list[dict[str, Any]]:
  """Every row of a scenario, in run order: the noise-free sanity rows,
  the sound rows at each epsilon, then the paper's (unsound) calibration."""
  out = [dict(algorithm='dsgd', eps=None, calibration='none',
              bits=cfg.bits),
         dict(algorithm='qdpsgd1', eps=None, calibration='zero',
              bits=cfg.bits)]
  top = max(cfg.epsilons)
  for eps in sorted(cfg.epsilons + cfg.sweep_epsilons):
    paper = eps in cfg.epsilons
    for algorithm in ('qdpsgd1', 'qdpsgd2', 'sdm'):
      if not (paper or algorithm in cfg.sweep_algorithms):
        continue
      out.append(dict(algorithm=algorithm, eps=eps, calibration='sound',
                      bits=cfg.bits))
      if algorithm == 'qdpsgd2' and (eps == top or not paper):
        out += [dict(algorithm=algorithm, eps=eps, calibration='sound',
                     bits=bits) for bits in cfg.more_bits]
  for eps in cfg.epsilons:
    for algorithm in cfg.paper_calibration:
      out.append(dict(algorithm=algorithm, eps=eps, calibration='paper',
                      bits=cfg.bits))
  for s in out:
    s['label'] = label(cfg, **s)
  return out


def _noise(cfg: Config, sc: Scenario, spec, sizes
           ) -> tuple[dd.DecentralizedPrivacy, float]:
  """The row's privacy setting at sigma 1 (seeds stacked) and the sigma it
  runs: 0 for the noise-free rows, else calibrated as ``spec`` says."""
  unit = privacy_setting(cfg, sc, spec['algorithm'], 1.0, len(sc.seeds),
                         spec['bits'])
  sigma = 0.0
  if spec['calibration'] == 'sound':
    sigma = dd.calibrate_decentralized(unit, sizes, spec['eps'], cfg.delta)
  elif spec['calibration'] == 'paper':
    sigma = paper_sigma(unit, sizes, spec['eps'], cfg.delta)
  return unit, sigma


def _train(cfg: Config, sc: Scenario, spec, sigma: float, trainers: dict):
  """Every seed's run of the row (per-round metrics and curves); compiles
  once per algorithm (and per Q-DPSGD-2 sigma), kept in ``trainers``."""
  algorithm, bits = spec['algorithm'], spec['bits']
  key = (algorithm, bits, sigma if algorithm == 'qdpsgd2' else None)
  if key not in trainers:
    trainers[key] = sc.trainer(
        make_algorithm(cfg, sc, algorithm, sigma, bits),
        algorithm in ('qdpsgd1', 'qdpsgd2'))
  hyper = ({} if algorithm in ('qdpsgd2', 'dsgd')
           else dict(noise_multiplier=sigma))
  return trainers[key](sc.keys, sc.params0, sc.shards, hyper)


def _spent(cfg: Config, setting, out, num_seeds: int, private: bool,
           algorithm: str) -> tuple[list, list]:
  """Per seed: the epsilon spent by the rounds that ran (sound) and the one
  the paper's theorem gives (None where it does not apply)."""
  spent, paper = [], []
  for j in range(num_seeds):
    used = out['batch_size'][j]  # [T, n]
    # The rounds' metrics: the accounting checks the sigma that ran.
    ran = dd.RoundMetrics(used, out['bits'][j], out['consensus'][j],
                          out['noise_multiplier'][j])
    spent.append(float(dd.run_epsilon(setting, ran, cfg.delta)) if private
                 else None)
    paper.append(dd.paper_epsilon(setting, used, cfg.delta)
                 if private and algorithm != 'sdm' else None)
  return spent, paper


def _seed_rows(sc: Scenario, spec, name: str, sigma: float, out, times,
               spent, paper) -> list[dict[str, Any]]:
  """One results row per seed of the setting ``name``."""
  rows = []
  for j, s in enumerate(sc.seeds):
    used = out['batch_size'][j]
    rows.append(dict(
        setting=name, algorithm=spec['algorithm'],
        target_epsilon=spec['eps'], calibration=spec['calibration'],
        bits=spec['bits'], seed=s, agents=sc.n, batch=sc.batch,
        noise_multiplier=sigma, epsilon=spent[j], paper_epsilon=paper[j],
        final_loss=float(out['loss'][j, -1]),
        final_test_accuracy=float(out['test_accuracy'][j, -1]),
        final_consensus=float(out['consensus'][j, -1]),
        total_time=float(times[j, -1]),
        bits_per_agent=float(out['bits'][j].sum(axis=0).max()),
        mean_batch=float(used.mean())))
  return rows


def _seed_curves(sc: Scenario, out, times) -> list[dict[str, Any]]:
  """Per seed: loss, test accuracy and simulated time at each evaluation."""
  return [dict(seed=s, loss=out['loss'][j].tolist(),
               test_accuracy=out['test_accuracy'][j].tolist(),
               time=times[j][np.asarray(sc.eval_rounds) - 1].tolist())
          for j, s in enumerate(sc.seeds)]


def _privacy_row(cfg: Config, spec, name: str, sigma: float, unit, sizes,
                 spent) -> dict[str, Any]:
  """The setting's noise, what the paper would run, and whether every seed
  kept to the target."""
  eps, algorithm = spec['eps'], spec['algorithm']
  return dict(
      setting=name, algorithm=algorithm, target_epsilon=eps,
      calibration=spec['calibration'], bits=spec['bits'],
      noise_multiplier=sigma, noise_stddev=sigma * cfg.l2_norm_clip,
      paper_noise_multiplier=(
          paper_sigma(unit, sizes, eps, cfg.delta)
          if eps is not None and algorithm != 'sdm' else None),
      within_target=None if eps is None else max(spent) <= eps * (1 + 1e-9))


def run_setting(cfg: Config, sc: Scenario, spec, sizes, trainers: dict,
                rows_done: row_cache.RowCache):
  """One setting (a row of ``settings``) on every seed: its name, seed rows,
  curves and privacy row. ``sizes``: the batch sizes it draws [T, S n]."""
  algorithm = spec['algorithm']
  unit, sigma = _noise(cfg, sc, spec, sizes)
  setting = privacy_setting(cfg, sc, algorithm, sigma, bits=spec['bits'])
  # called at once by rows_done.get, or not at all
  out = rows_done.get(dict(spec, sigma=sigma),
                      lambda: _train(cfg, sc, spec, sigma, trainers))
  p_bits = 16.0 * sc.dimension
  times = np.cumsum(out['compute_time'] + cfg.comm_time
                    * out['bits'].max(axis=-1) / p_bits, axis=1)
  private = algorithm != 'dsgd' and sigma > 0
  spent, paper = _spent(cfg, setting, out, len(sc.seeds), private, algorithm)
  name = spec['label']
  if spec['calibration'] == 'paper':  # sound here only if no seed overspends
    name += (' (unsound)' if max(spent) > spec['eps'] * (1 + 1e-9)
             else ' (sound here)')
  return (name, _seed_rows(sc, spec, name, sigma, out, times, spent, paper),
          _seed_curves(sc, out, times),
          _privacy_row(cfg, spec, name, sigma, unit, sizes, spent))


def run_scenario(cfg: Config, ds, n: int, batch: float,
                 ctx: runner.Context) -> ScenarioRuns:
  """Every setting of one scenario: rows per (setting, seed) and curves."""
  sc = Scenario(cfg, ds, n, batch)
  deadline_sizes = sc.deadline_sizes()  # [S, T, n]
  stacked = np.concatenate(list(deadline_sizes), axis=1)  # [T, S n]
  fixed_sizes = np.full_like(stacked, sc.fixed)
  rows, curves, privacy = [], {}, []
  trainers = {}  # one compilation per algorithm (and per Q-DPSGD-2 sigma)
  # Finished rows are kept, so that a long (full) run resumes in parts.
  rows_done = row_cache.RowCache(ctx.checkpoint_dir(f'n{n}_B{batch:g}'),
                                 cfg.to_dict())
  for spec in settings(cfg):
    t0 = time.time()
    deadline = spec['algorithm'] in ('qdpsgd1', 'qdpsgd2')
    name, mine, runs, private = run_setting(
        cfg, sc, spec, stacked if deadline else fixed_sizes, trainers,
        rows_done)
    rows += mine
    curves.setdefault(name, []).extend(runs)
    privacy.append(private)
    ctx.say(f"n={n} B={batch:g} {name}: sigma={private['noise_multiplier']:.4g}"
            f", final loss {np.mean([r['final_loss'] for r in mine]):.4f}, "
            f"test acc {np.mean([r['final_test_accuracy'] for r in mine]):.3f}"
            f' ({time.time() - t0:.1f}s)')
  return ScenarioRuns(
      agents=n, batch=batch, m=sc.m, records=sc.records,
      dimension=sc.dimension, spectral_gap=sc.gap,
      edges=int(sc.adjacency.sum() // 2), deadline=sc.deadline.time,
      max_batch=sc.deadline.max_batch_size, eval_rounds=sc.eval_rounds,
      rows=rows, curves=curves, privacy=privacy, seeds=sc.seeds)


def paper_sigma(unit: dd.DecentralizedPrivacy, sizes, eps: float,
                delta: float) -> float:
  """The sigma the paper's Thm. 1 / 5 would take for the same target
  (unsound: see ``dpjax.distributed`` on the paper's accounting)."""
  lo, hi = 1e-6, 1e8
  for _ in range(100):
    mid = (lo * hi)**0.5
    if dd.paper_epsilon(unit._replace(noise_multiplier=mid), sizes,
                        delta) <= eps:
      hi = mid
    else:
      lo = mid
  return hi


def eval_rounds(cfg: Config) -> list[int]:
  """The rounds after which loss and accuracy are measured (T last)."""
  every = max(1, cfg.rounds // cfg.num_evals)
  out = list(range(every, cfg.rounds + 1, every))
  return out if out[-1] == cfg.rounds else out + [cfg.rounds]


def load_data(cfg):
  options = cfg.data_options if cfg.dataset == 'synthetic' else {}
  ds = data_lib.load(cfg.dataset, seed=cfg.seed,
                     fallback=cfg.allow_fallback, **options)
  if ds.task != 'classification':
    raise ValueError(f"qdpsgd needs a classification dataset, got {ds.name}")
  return ds


def run(cfg: Config, ctx: runner.Context) -> Results:
  """Every scenario (agents x batch sizes); the claims' plan, fixed from the
  settings alone before any training."""
  ds = load_data(cfg)
  the_plan = plan(cfg)
  scenarios = []
  for n in cfg.num_agents:
    for batch in cfg.expected_batch_sizes:
      scenarios.append(run_scenario(cfg, ds, n, batch, ctx))
  return Results(dataset=report_lib.dataset_info(ds), scenarios=scenarios,
                 plan=the_plan, chance=1.0 / ds.num_classes)
