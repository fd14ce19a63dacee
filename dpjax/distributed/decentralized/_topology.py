"""Gossip graphs and their mixing matrices (Ding et al., Q-DPSGD, Sec. 3).

A graph is a boolean adjacency matrix [n, n] (symmetric, no self loops).
``mixing_matrix`` turns it into W = I - L / kappa with L the graph Laplacian:
W is symmetric and doubly stochastic, and for a connected graph with
kappa > lambda_max(L) / 2 its eigenvalue 1 is simple (null(I - W) =
span(1)) and every other eigenvalue lies in (-1, 1), so repeated gossip
x <- W x converges to the average at the rate beta = max(|lambda_2(W)|,
|lambda_n(W)|) < 1 (``spectral_gap`` is 1 - beta).

Graphs are built on the host in NumPy (they are public, data-independent
inputs); random graphs take an explicit key.
"""

import jax
import numpy as np

from dpjax import _keys
from dpjax import _validate

_STREAM = _keys.register('erdos_renyi_graph', __name__)


def _num_agents(num_agents) -> int:
  _validate.integer_at_least(2, num_agents=num_agents)
  return int(num_agents)


def erdos_renyi(key: jax.Array, num_agents: int, p: float) -> np.ndarray:
  """Erdos-Renyi graph G(n, p): each edge present independently w.p. p.

  Args:
    key: PRNG key (required).
    num_agents: n >= 2.
    p: edge probability in (0, 1].

  Returns:
    Boolean adjacency [n, n], symmetric, False on the diagonal. It may be
    disconnected; ``mixing_matrix`` refuses a disconnected graph.

  References:
    Ding et al., Q-DPSGD, Sec. 5 (experiments: G(n, 0.4)).

  Example:
    >>> a = erdos_renyi(jax.random.key(0), 5, 1.0)
    >>> int(a.sum()), bool((a == a.T).all())
    (20, True)
  """
  n = _num_agents(num_agents)
  _validate.half_open_unit(p=p)
  u = np.asarray(jax.random.uniform(
      _keys.stream(_validate.key(key), _STREAM), (n, n)))
  upper = np.triu(u < float(p), k=1)
  return upper | upper.T


def ring(num_agents: int) -> np.ndarray:
  """Ring graph: agent i is linked to i - 1 and i + 1 (mod n).

  Example:
    >>> ring(4).sum(axis=1).tolist()
    [2, 2, 2, 2]
  """
  n = _num_agents(num_agents)
  a = np.zeros((n, n), bool)
  i = np.arange(n)
  a[i, (i + 1) % n] = True
  a[(i + 1) % n, i] = True
  return a


def complete(num_agents: int) -> np.ndarray:
  """Complete graph on n agents.

  Example:
    >>> complete(3).astype(int).tolist()
    [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
  """
  n = _num_agents(num_agents)
  return ~np.eye(n, dtype=bool)


def _check_adjacency(adjacency) -> np.ndarray:
  a = np.asarray(adjacency)
  if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 2:
    raise ValueError(f'Expected a square adjacency [n, n] with n >= 2, got '
                     f'shape {a.shape}.')
  if a.dtype != bool:
    raise ValueError(f'Expected a boolean adjacency, got dtype {a.dtype}.')
  if not (a == a.T).all():
    raise ValueError('Expected a symmetric adjacency (undirected graph).')
  if a.diagonal().any():
    raise ValueError('Expected no self loops (False on the diagonal).')
  return a


def num_components(adjacency) -> int:
  """Number of connected components of the graph.

  Example:
    >>> num_components(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], bool))
    2
  """
  a = _check_adjacency(adjacency)
  n = a.shape[0]
  label = -np.ones(n, int)
  count = 0
  for start in range(n):
    if label[start] >= 0:
      continue
    stack = [start]
    label[start] = count
    while stack:
      i = stack.pop()
      for j in np.flatnonzero(a[i]):
        if label[j] < 0:
          label[j] = count
          stack.append(j)
    count += 1
  return count


def laplacian(adjacency) -> np.ndarray:
  """Graph Laplacian L = D - A (float64)."""
  a = _check_adjacency(adjacency).astype(np.float64)
  return np.diag(a.sum(axis=1)) - a


def mixing_matrix(adjacency, kappa: float | None = None) -> np.ndarray:
  """W = I - L / kappa: symmetric, doubly stochastic gossip weights.

  Args:
    adjacency: boolean [n, n], symmetric, no self loops, connected.
    kappa: scale, > lambda_max(L) / 2. Default: lambda_max(L) / 2 +
      lambda_2(L) / 2, the kappa that minimizes beta = max(|1 -
      lambda_2 / kappa|, |1 - lambda_max / kappa|) (the fastest gossip of
      this family).

  Returns:
    W as float64 [n, n]; w_ij > 0 exactly on the edges and the diagonal
    when kappa > max degree (always true of the default for graphs whose
    lambda_max + lambda_2 exceeds twice the max degree; otherwise some w_ii
    may be <= 0, which is allowed: W stays doubly stochastic with a spectral
    gap > 0).

  Raises:
    ValueError: a disconnected graph (naming its number of components), or
      kappa <= lambda_max(L) / 2 (naming both).

  References:
    Ding et al., Q-DPSGD, Sec. 3; Xiao & Boyd 2004 (best constant weights).

  Example:
    >>> w = mixing_matrix(ring(4))
    >>> bool(np.allclose(w.sum(axis=0), 1) and np.allclose(w, w.T))
    True
  """
  a = _check_adjacency(adjacency)
  components = num_components(a)
  if components > 1:
    raise ValueError(f'Expected a connected graph, got {components} '
                     'components: gossip cannot reach consensus.')
  lap = laplacian(a)
  eig = np.linalg.eigvalsh(lap)
  lam_2, lam_max = float(eig[1]), float(eig[-1])
  if kappa is None:
    kappa = (lam_max + lam_2) / 2
  else:
    _validate.positive(kappa=kappa)
    _validate.finite(kappa=kappa)
    if not float(kappa) > lam_max / 2:
      raise ValueError(f'Expected kappa={kappa} > lambda_max(L)/2 = '
                       f'{lam_max / 2:.6g}: W would have an eigenvalue <= -1.')
  n = a.shape[0]
  return np.eye(n) - lap / float(kappa)


def spectral_gap(mixing) -> float:
  """1 - beta with beta = max(|lambda_2(W)|, |lambda_n(W)|).

  Gossip x <- W x contracts the distance to the average by beta per step
  (in the Euclidean norm of the agent axis), so a larger gap mixes faster.

  Example:
    >>> round(spectral_gap(mixing_matrix(complete(4))), 6)
    1.0
  """
  w = np.asarray(mixing, np.float64)
  if w.ndim != 2 or w.shape[0] != w.shape[1]:
    raise ValueError(f'Expected a square mixing matrix, got shape {w.shape}.')
  eig = np.sort(np.linalg.eigvalsh((w + w.T) / 2))
  beta = max(abs(eig[0]), abs(eig[-2]))
  return float(1 - beta)
