"""``Protocol``: a client protocol as a training loop runs and accounts it.

A distributed mean protocol (cpSGD, DDG, Skellam, the Gaussian baseline, a
plain mean) is what a federated loop needs from it: a traceable mean of the
client vectors, the DpEvent of one round from the protocol's companion, and
the bits one client sends.
"""

from typing import Callable, NamedTuple

import dp_accounting
import jax

Mean = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


class Protocol(NamedTuple):
  """A distributed mean protocol, as a federated loop runs and accounts it.

  Attributes:
    mean: ``(key, vectors [n, d], param) -> estimate [d]``, traceable (a
      loop jits it inside its round scan). ``param`` is a traced float32
      scalar (e.g. the Gaussian clients' stddev): runs whose protocols share
      ``mean`` and differ only in ``param`` share one compilation.
    param: the value passed as ``param``.
    event: the DpEvent of one round, from the protocol's companion built
      from the same hyperparameters; None where a round has no guarantee.
    bits_per_client: bits one client sends per round.

  Example:
    >>> p = Protocol(lambda key, v, param: v.mean(axis=0))
    >>> p.mean(jax.random.key(0), jnp.ones((3, 2)), p.param).tolist()
    [1.0, 1.0]
  """
  mean: Mean
  param: float = 0.0
  event: dp_accounting.DpEvent | None = None
  bits_per_client: float = 0
