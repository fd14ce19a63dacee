"""Gossip graphs, mixing matrices and plain gossip (Ding et al., Sec. 3)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import distributed as dd


def _graphs():
  return [dd.ring(7), dd.complete(5),
          dd.erdos_renyi(jax.random.key(3), 10, 0.4)]


@pytest.mark.parametrize('graph', _graphs(), ids=['ring', 'complete', 'er'])
def test_mixing_matrix_is_symmetric_doubly_stochastic_with_consensus_null_space(
    graph):
  if dd.num_components(graph) > 1:
    pytest.fail('the fixed-key ER graph should be connected')
  w = dd.mixing_matrix(graph)
  n = w.shape[0]
  np.testing.assert_allclose(w, w.T, atol=0)
  np.testing.assert_allclose(w.sum(axis=0), np.ones(n), atol=1e-12)
  np.testing.assert_allclose(w.sum(axis=1), np.ones(n), atol=1e-12)
  # Off the graph and the diagonal, no weight.
  assert (w[~graph & ~np.eye(n, dtype=bool)] == 0).all()
  # null(I - W) = span(1): exactly one eigenvalue 1, its vector constant.
  vals, vecs = np.linalg.eigh(np.eye(n) - w)
  assert np.sum(np.abs(vals) < 1e-9) == 1
  v = vecs[:, np.argmin(np.abs(vals))]
  np.testing.assert_allclose(np.abs(v), np.full(n, 1 / np.sqrt(n)), atol=1e-9)
  # Every other eigenvalue of W lies in (-1, 1).
  assert 0 < dd.spectral_gap(w) <= 1


def test_gossip_converges_to_the_average_at_the_spectral_gap_rate():
  graph = dd.erdos_renyi(jax.random.key(1), 12, 0.3)
  assert dd.num_components(graph) == 1
  w = dd.mixing_matrix(graph)
  beta = 1 - dd.spectral_gap(w)
  x = jax.random.normal(jax.random.key(2), (12, 5), jnp.float32)
  target = x.mean(axis=0)
  errors = []
  for _ in range(60):
    errors.append(float(jnp.linalg.norm(x - target)))
    x = dd.gossip(w, x)
  errors = np.asarray(errors)
  # Never slower than beta per step (up to float32 rounding) ...
  assert (errors[1:] <= beta * errors[:-1] * (1 + 1e-4) + 1e-5).all()
  # ... and asymptotically at beta: the slowest mode dominates.
  rate = (errors[40] / errors[20])**(1 / 20)
  assert abs(rate - beta) < 0.02, (rate, beta)
  np.testing.assert_allclose(x.mean(axis=0), target, atol=1e-5)


def test_gossip_is_per_leaf_and_checks_the_agent_axis():
  w = dd.mixing_matrix(dd.complete(3))
  tree = {'a': jnp.arange(3.0), 'b': jnp.ones((3, 2, 2))}
  out = dd.gossip(w, tree)
  np.testing.assert_allclose(out['a'], np.ones(3), atol=1e-6)
  assert out['b'].shape == (3, 2, 2)
  with pytest.raises(ValueError, match='leading agent axis of size 3'):
    dd.gossip(w, jnp.ones((4, 2)))


def test_disconnected_graph_and_small_kappa_are_refused():
  a = np.zeros((4, 4), bool)
  a[0, 1] = a[1, 0] = a[2, 3] = a[3, 2] = True
  with pytest.raises(ValueError, match='2 components'):
    dd.mixing_matrix(a)
  lam_max = float(np.linalg.eigvalsh(dd.laplacian(dd.ring(6)))[-1])
  with pytest.raises(ValueError, match=r'kappa=1.5 > lambda_max\(L\)/2 = 2'):
    dd.mixing_matrix(dd.ring(6), kappa=1.5)
  assert lam_max == pytest.approx(4.0)
  dd.mixing_matrix(dd.ring(6), kappa=2.01)  # just above: accepted


@pytest.mark.parametrize('call, match', [
    (lambda: dd.ring(1), 'num_agents=1'),
    (lambda: dd.complete(0), 'num_agents=0'),
    (lambda: dd.erdos_renyi(jax.random.key(0), 1, 0.5), 'num_agents=1'),
    (lambda: dd.erdos_renyi(jax.random.key(0), 5, 0.0), 'p=0.0'),
    (lambda: dd.erdos_renyi(jax.random.key(0), 5, 1.5), 'p=1.5'),
    (lambda: dd.mixing_matrix(dd.ring(4), kappa=-1.0), 'kappa=-1.0'),
    (lambda: dd.mixing_matrix(np.ones((3, 3))), 'boolean adjacency'),
])
def test_bad_graph_input_names_the_value(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_erdos_renyi_edge_frequency_matches_p():
  a = dd.erdos_renyi(jax.random.key(7), 200, 0.4)
  pairs = 200 * 199 / 2
  frac = a.sum() / 2 / pairs
  # Binomial(19900, 0.4): sd 0.0035; 5 sd.
  assert abs(frac - 0.4) < 0.018
  assert not a.diagonal().any() and (a == a.T).all()
