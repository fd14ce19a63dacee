"""The one reader of a step's privacy: the DpEvent from the state that ran.

Every privatizing transform keeps, in its optimizer state, the values its
last step ran with, and its state answers its own event (a
``step_event(sampler, parts)`` method and a ``privacy_role`` of
``'privatizer'``). ``step_event`` finds that one state in a chain's state,
with the parts it needs (``'divisor'``: a ``normalize``; ``'count'``: an
adaptive clipping count release), and asks it. So a ledger records what
ran, never a second copy of the hyperparameters (Abadi et al. 2016, Alg. 1,
for DP-SGD; each state's docstring cites its mechanism).
"""

from typing import Any

import dp_accounting
import jax


def _has_role(x: Any) -> bool:
  return isinstance(getattr(type(x), 'privacy_role', None), str)


def privacy_states(opt_state: Any) -> tuple[Any, ...]:
  """The parts of an optimizer state ``step_event`` reads (small).

  Keep these per step instead of the whole state to record later without a
  device sync per step.

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(100, 0.1)
    >>> tx = dpjax.dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
    >>> [type(s).__name__ for s in privacy_states(tx.init(jnp.zeros(3)))]
    ['DpsgdNoiseState', 'NormalizeState']
  """
  return tuple(x for x in jax.tree.leaves(opt_state, is_leaf=_has_role)
               if _has_role(x))


def _privatizer(parts: tuple[Any, ...]) -> Any:
  found = [p for p in parts if p.privacy_role == 'privatizer']
  if len(found) != 1:
    raise ValueError(f'Expected one privatizing state (add_dpsgd_noise or a '
                     f'chain built on it, or a compressed-GD step) in the '
                     f'optimizer state, found {len(found)}.')
  return found[0]


def step_event(opt_state: Any, sampler: Any) -> dp_accounting.DpEvent:
  """The DpEvent of the step that produced ``opt_state``, read from it.

  Args:
    opt_state: the state a step returned (a chain's state, or its
      ``privacy_states``), of one run (index a seed axis first).
    sampler: the step's batch sampler (``dp_event``,
      ``expected_batch_size``, ``unit``), e.g.
      ``dpjax.sampling.PoissonSampler``; None for a step on the full batch
      (``dp_compgd``, ``dp_projected_gd``), whose mechanism is not
      amplified, and only there.

  Returns:
    The event of one step, amplified by the sampler.

  Raises:
    ValueError: no or several privatizing states, a state from before any
      step, an unclipped chain, a sum a non-linear map changed, a sum
      clipped per example under a user-level sampler (or the reverse), a
      ``normalize`` divisor other than the sampler's expected batch size,
      a state with a batch axis, a sampler the mechanism's analysis does
      not cover, or a sampler for a full-batch step (None) or None for a
      sampled one (the state's own checks).

  Example:
    >>> sampler = dpjax.sampling.PoissonSampler(1000, 0.032)
    >>> tx = dpjax.dpsgd(0.1, 1.0, 1.1, sampler, key=jax.random.key(0))
    >>> _, s = tx.update(jnp.ones((2, 3)), tx.init(jnp.zeros(3)),
    ...                  jnp.zeros(3), mask=jnp.ones(2, bool))
    >>> round(step_event(s, sampler).noise_multiplier, 6)
    1.1
  """
  parts = privacy_states(opt_state)
  return _privatizer(parts).step_event(sampler, parts)


def noise_handle(opt_state: Any) -> tuple[Any, int]:
  """``(key, step)`` of the noise the last step of ``opt_state`` drew."""
  return _privatizer(privacy_states(opt_state)).noise_handle()
