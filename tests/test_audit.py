"""Distinguishing audits: the statistics, reproducibility and bad input. The
audits of every mechanism (and of their broken twins) are in
tests/test_audit_cases.py."""

import math

import jax
import jax.numpy as jnp
import pytest
from scipy import stats

from dpjax import audit
from dpjax import noise

DELTA = 1e-5


@pytest.mark.parametrize('k, n', [(0, 10), (3, 10), (10, 10), (17, 1000),
                                  (500, 1000)])
def test_clopper_pearson_matches_scipys_exact_interval(k, n):
  ref = stats.binomtest(k, n).proportion_ci(0.95, method='exact')
  low, high = audit.clopper_pearson(k, n, 0.95)
  assert low == pytest.approx(ref.low, abs=1e-12)
  assert high == pytest.approx(ref.high, abs=1e-12)
  assert high == pytest.approx(stats.beta.ppf(0.975, k + 1, n - k)
                               if k < n else 1.0)


def test_lower_bound_formula_and_no_evidence():
  # Joint 95%: each rate's one-sided upper bound at 97.5% (union bound), the
  # level jax_privacy's CanaryScoreAuditor uses too (significance / 2).
  a = stats.beta.ppf(0.975, 10 + 1, 10000 - 10)
  b = stats.beta.ppf(0.975, 9000 + 1, 10000 - 9000)
  assert audit.epsilon_lower_bound(10, 9000, 10000, DELTA, 0.95) == (
      pytest.approx(math.log((1 - DELTA - b) / a)))
  assert audit.epsilon_lower_bound(5000, 5000, 10000, DELTA) == 0.0


def _laplace(scale):
  return lambda key, x: x + noise.laplace(key, (), scale=scale)


def test_audits_are_reproducible_from_their_key():
  args = (_laplace(1.0), jnp.float32(0.0), jnp.float32(1.0))
  a = audit.distinguishing_audit(jax.random.key(5), *args, trials=2000,
                                 delta=0.0)
  b = audit.distinguishing_audit(jax.random.key(5), *args, trials=2000,
                                 delta=0.0)
  c = audit.distinguishing_audit(jax.random.key(6), *args, trials=2000,
                                 delta=0.0)
  assert a == b and a != c


@pytest.mark.parametrize('kwargs, match', [
    (dict(trials=99), 'trials=99'),
    (dict(delta=1.0), 'delta=1.0'),
    (dict(delta=-0.1), 'delta=-0.1'),
    (dict(d_prime=jnp.zeros(3)), 'same structure and shapes'),
])
def test_audit_bad_input(kwargs, match):
  base = dict(d=jnp.float32(0.0), d_prime=jnp.float32(1.0), trials=1000,
              delta=DELTA)
  base.update(kwargs)
  with pytest.raises(ValueError, match=match):
    audit.distinguishing_audit(jax.random.key(0), _laplace(1.0), **base)
  with pytest.raises(ValueError, match='successes=11'):
    audit.clopper_pearson(11, 10)
