"""Audit case of BandMF (``dpjax.bandmf``, correlated noise over steps).

Honest: 16 steps of ``bandmf`` with an optimized 2-band Toeplitz strategy;
the canary (gradient 100 C along e_0, clipped to C e_0) takes part every
second step (b = 2, 8 participations), the b-min-separation schedule at its
worst (``CyclicPoissonSampler`` at rate 1 over 2 partitions); its stated
epsilon is the run's Gaussian mechanism with the multi-participation
sensitivity ``sqrt(cyclic_squared_sensitivities(C, 2)[16])``, the event the
reader composes for that run. The score is the LLR: the released sums y satisfy
C y = C G + Z, so <C Delta, C y_0> with Delta the canary's participation
pattern. Broken twin: the same run, claimed with one participation's
sensitivity (the column norm), as if each example took part once: its
sensitivity is sqrt(8) times larger than claimed.

Example:
  >>> bandmf_case().broken.name
  'bandmf_single_participation_claim'
"""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

from dpjax import correlated_noise
from dpjax import sampling
from dpjax import transforms
from dpjax.audit import _cases
from dpjax.audit._cases import ADD_REMOVE
from dpjax.audit._cases import AuditCase
from dpjax.audit._cases import DELTA

_STEPS, _SEPARATION, _EXAMPLES = 16, 2, 8


def bandmf_case() -> AuditCase:
  clip, sigma = 1.0, 2.0 * np.sqrt(_STEPS // _SEPARATION)
  strategy = correlated_noise.banded_toeplitz(
      correlated_noise.optimize_banded_toeplitz(_STEPS, 2), _STEPS)
  grads = _cases._canary_grads(_EXAMPLES)  # pylint: disable=protected-access
  pattern = np.arange(_STEPS) % _SEPARATION == 0
  present = np.ones((_STEPS, _EXAMPLES), bool)
  absent = present.copy()
  absent[pattern, 0] = False
  c = np.asarray(strategy.matrix(), np.float32)
  direction = c @ pattern.astype(np.float32)  # C Delta, clip 1 along e_0

  def mechanism(key, mask):
    sampler = sampling.CyclicPoissonSampler(_SEPARATION * _EXAMPLES, 1.0,
                                            _SEPARATION)
    tx = transforms.bandmf(1.0, clip, sigma, sampler, strategy, key=key)
    params = jnp.zeros(grads.shape[1])

    def step(state, step_mask):
      updates, state = tx.update(grads, state, params, mask=step_mask)
      return state, -updates * _EXAMPLES

    return jax.lax.scan(step, tx.init(params), mask)[1]

  def score(y):
    return jnp.dot(jnp.asarray(direction), jnp.asarray(c) @ y[:, 0])

  def claim(participations):
    column_norm = float(np.max(strategy.column_norms()))
    sens = (np.sqrt(correlated_noise.cyclic_squared_sensitivities(
        strategy.band, _SEPARATION)[_STEPS]) if participations is None
            else column_norm)
    event = dp_accounting.GaussianDpEvent(sigma * column_norm / float(sens))
    return _cases._epsilon(event, DELTA, 'pld')  # pylint: disable=protected-access

  case = AuditCase(
      'bandmf', mechanism, jnp.asarray(absent), jnp.asarray(present), score,
      claim(None), DELTA, ADD_REMOVE,
      'bandmf, 2-band optimized Toeplitz over 16 steps; a canary gradient of '
      'norm 100 C along e_0 in every second step (8 participations), masked '
      'out in D; score = <C Delta, C y> (the Gaussian LLR): tight')
  twin = _cases._twin(  # pylint: disable=protected-access
      case, 'bandmf_single_participation_claim', mechanism,
      'the same run claimed with one participation\'s sensitivity (the '
      'column norm) while the canary takes part 8 times',
      epsilon=claim(1))
  return case._replace(broken=twin)
