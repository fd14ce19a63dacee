"""The programs of the multi-process check, shared by the worker processes
and the single-process reference (tests/test_multiprocess.py)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from dpjax import distributed as dd
from dpjax import sampling
from dpjax.compression import low_precision_quantizer

NUM_CLIENTS, DIM = 8, 16
NUM_AGENTS, FEATURES, RECORDS = 4, 3, 12


def global_mesh(axis_name: str) -> jax.sharding.Mesh:
  """All devices of all processes, in one axis."""
  return jax.sharding.Mesh(np.array(jax.devices()), (axis_name,))


def _fetch(x) -> np.ndarray:
  """The whole (global) array as numpy, in every process."""
  if jax.process_count() > 1 and not x.is_fully_addressable:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


def _loss(params, example):
  x, y = example
  return 0.5 * jnp.square(jnp.dot(params['w'], x) + params['b'] - y)


def cpsgd_round(mesh) -> np.ndarray:
  cfg = dd.CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=64, linf_clip=0.6,
                       rotate=True)
  xs = np.random.default_rng(0).normal(size=(NUM_CLIENTS, DIM)).astype(
      np.float32) * 0.2
  key = jax.random.key(11)
  if mesh is None:
    return _fetch(dd.distributed_mean(cfg, key, xs))
  return _fetch(dd.distributed_mean_sharded(cfg, key, xs, mesh('clients'),
                                            'clients'))


def gossip_rounds(mesh) -> dict[str, np.ndarray]:
  w = dd.mixing_matrix(dd.ring(NUM_AGENTS))
  alg = dd.qdpsgd1(_loss, w, l2_norm_clip=0.5, noise_multiplier=1.0,
                   mixing_rate=0.5, quantizer=low_precision_quantizer(0.125, 4),
                   learning_rate=0.2,
                   mesh=None if mesh is None else mesh('agents'))
  rng = np.random.default_rng(1)
  x = rng.normal(size=(NUM_AGENTS, RECORDS, FEATURES)).astype(np.float32)
  y = rng.normal(size=(NUM_AGENTS, RECORDS)).astype(np.float32)
  sampler = sampling.DeadlineSampler(RECORDS, 5)
  state = alg.init({'w': jnp.full((FEATURES,), 0.1), 'b': jnp.zeros(())})
  take = jax.vmap(lambda a, i: a[i])
  for t in range(3):
    b = sampler.sample(jax.random.key(100 + t), NUM_AGENTS)
    batch = dd.AgentBatch((take(x, b.indices), take(y, b.indices)), b.mask)
    state, _ = alg.round(state, jax.random.key(0), batch)
  return {f'gossip_{k}': _fetch(v) for k, v in state.params.items()}


def run_all(mesh) -> dict[str, np.ndarray]:
  return dict(cpsgd=cpsgd_round(mesh), **gossip_rounds(mesh))
