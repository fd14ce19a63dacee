"""Every mechanism's stated epsilon, attacked (``dpjax.audit.audit_cases``).

Default stage: each case runs jitted and vmapped on both neighbours and its
declared statement is well formed. Slow stage: the honest audit stays at or
below the stated epsilon (and, where the attack can be tight, reaches a
stated fraction of it), and the broken twin's lower bound exceeds its claim.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import audit

# Names only: a case is built (its accountant run, its data drawn) by the
# first test that needs it, not at collection.
NAMES = audit.audit_case_names()
TRIALS = 100_000
RELATIONS = ('add/remove', 'replace-one', 'replace-one label',
             'any two inputs')
# lower bound / stated epsilon at TRIALS that the honest audit must exceed
# (the attack has teeth), for every case but the two whose claims are loose
# (cpSGD's Thm 1, Q-DPSGD-2's zCDP with a rounding term; see their
# ``attack``). Ratios measured at key 0 and CONFIDENCE in the comments; the
# floors leave room for sampling noise.
TEETH = {
    'gaussian': 0.3,  # 0.39
    'laplace': 0.85,  # 0.98
    'discrete_gaussian': 0.4,  # 0.48
    'exponential': 0.7,  # 0.85
    'dp_knn': 0.8,  # 0.95
    'noisy_reg': 0.8,  # 0.98
    'random_trees': 0.8,  # 0.93
    'private_histogram': 0.85,  # 0.97
    'dpsgd_vmap': 0.45,  # 0.54
    'dpsgd_ghost': 0.45,  # 0.54
    'dpsgd_ghost_gather': 0.4,  # 0.50
    'rs_dpsgd': 0.38,  # 0.43 (0.52 with the masks of jax.random.permutation)
    'dp_compgd': 0.45,  # 0.55
    'laplace_privatizer': 0.8,  # 0.97
    'compressive': 0.75,  # 0.91
    'ddg': 0.2,  # 0.44 (16 clients; 0.28 at 4)
    'skellam': 0.35,  # 0.47 (16 clients)
    'qdpsgd1': 0.44,  # 0.4499 at 29 cases (0.454 at 25, 0.57 at 18)
    'qdpsgd1_ghost': 0.44,  # 0.4499: its clipped gradient equals vmap's here
    'exact_gaussian': 0.35,  # 0.46
    'adaptive_dpsgd': 0.45,  # 0.57
    'user_dpsgd': 0.45,  # 0.56
    'bandmf': 0.4,  # 0.48 (0.25-0.58; 0.42-0.59 before: see below)
    'user_level_unit': 0.45,  # 0.57
    # bandmf and scaled_clipped_sum were re-measured when the noise keys
    # changed (0.2.0): the same distributions, other draws (a KS test of
    # the scaled case's score finds them equal); lower / stated over audit
    # keys 0-9 in the comment.
    'scaled_clipped_sum': 0.3,  # 0.34 (0.31-0.56; 0.47-0.57 before)
    'shared_noise_key': 0.5,  # 0.56 (one key, at 31 cases)
    'adaptive_bandmf_count': 0.45,  # 0.54
    'reshuffled_epochs_bandmf': 0.3,  # 0.49 (at 31 cases)
    'restarted_cyclic_step': 0.4,  # 0.47 (at 31 cases)
    'dpsgd_microbatch': 0.4,  # 0.48 (at 32 cases)
}
# Twins whose shift is at most about 2x the claimed one, which TRIALS cannot
# refute reliably (lower bound / claim 1.00-1.18 over keys 0-2): they get the
# full preset's 10^6 trials (1.43-1.57 and 1.51-1.65 over keys 0-3). A
# reshuffled pattern splits into its even and its odd epochs, each separated
# by the steps per epoch, so its shift is at most twice the claimed one for
# any strategy (_cases_participation's module doc).
TWIN_TRIALS = {'reshuffled_epochs_bandmf': 1_000_000,
               'restarted_cyclic_step': 1_000_000}


# Exact samplers (rejection loops) and the tree fit compile for 5-20 s each
# on 2 CPU cores: their run check joins the slow stage, where their audits
# (which also refuse non-finite scores) run too.
HEAVY_COMPILE = ('laplace', 'discrete_gaussian', 'dp_knn', 'noisy_reg',
                 'random_trees', 'private_histogram', 'laplace_privatizer',
                 'compressive', 'ddg', 'skellam', 'qdpsgd2', 'exact_gaussian')


def _staged(names):
  return [pytest.param(n, id=n, marks=[pytest.mark.slow]
                       if n in HEAVY_COMPILE else []) for n in names]


def test_registry_names_are_unique_and_teeth_name_real_cases():
  assert len(set(NAMES)) == len(NAMES)
  assert set(TEETH) <= set(NAMES) and set(HEAVY_COMPILE) <= set(NAMES)
  with pytest.raises(ValueError, match='name'):
    audit.audit_case('no_such_case')


@pytest.mark.slow
def test_every_case_has_a_broken_twin_with_its_own_name():
  cases = audit.audit_cases()
  assert [c.name for c in cases] == list(NAMES)
  twins = [c.broken.name for c in cases]  # every case has a twin
  assert len(set(NAMES + tuple(twins))) == 2 * len(NAMES)


@pytest.mark.parametrize('name', _staged(NAMES))
def test_case_runs_on_both_neighbours_under_jit_and_vmap(name):
  case = audit.audit_case(name)
  assert case.relation in RELATIONS and case.attack
  assert math.isfinite(case.epsilon) and case.epsilon > 0
  assert 0 <= case.delta < 1
  shapes = lambda t: jax.tree.map(lambda x: (jnp.shape(x), jnp.result_type(x)),
                                  t)
  assert jax.tree.structure(case.d) == jax.tree.structure(case.d_prime)
  assert shapes(case.d) == shapes(case.d_prime)
  if case.broken is not None:
    assert shapes(case.broken.d) == shapes(case.broken.d_prime)
    assert case.broken.epsilon > 0
  keys = jax.random.split(jax.random.key(0), 200)
  run = jax.jit(jax.vmap(lambda k, data: case.score(case.mechanism(k, data)),
                         in_axes=(0, None)))
  s_d, s_dp = np.asarray(run(keys, case.d)), np.asarray(run(keys, case.d_prime))
  assert s_d.shape == s_dp.shape == (200,)
  assert s_d.dtype == np.float32
  assert np.all(np.isfinite(s_d)) and np.all(np.isfinite(s_dp))
  assert np.ptp(np.concatenate([s_d, s_dp])) > 0  # the score is not constant


# Family-wise 95% over the honest cases (Bonferroni): a tight attack's
# 95% bound alone exceeds the true epsilon in up to 5% of keys (measured:
# the Laplace case at key 0 gives 1.00025 at 0.95, a 2.9-sigma held-out
# count, while 10^6 fresh runs give ln ratio 0.998).
CONFIDENCE = 1 - 0.05 / len(NAMES)


def _audit(case, trials=TRIALS):
  return audit.distinguishing_audit(
      jax.random.key(0), case.mechanism, case.d, case.d_prime, trials=trials,
      delta=case.delta, score=case.score, confidence=CONFIDENCE)


@pytest.mark.spread
@pytest.mark.slow
@pytest.mark.parametrize('name', NAMES)
def test_honest_audit_stays_below_the_stated_epsilon(name):
  case = audit.audit_case(name)
  bound = _audit(case).epsilon_lower_bound
  assert bound <= case.epsilon, (case.name, bound, case.epsilon)
  if case.name in TEETH:  # the attack has teeth
    assert bound > TEETH[case.name] * case.epsilon, (case.name, bound)


@pytest.mark.spread
@pytest.mark.slow
@pytest.mark.parametrize('name', NAMES)
def test_broken_twin_is_refuted(name):
  case = audit.audit_case(name).broken
  bound = _audit(case, TWIN_TRIALS.get(name, TRIALS)).epsilon_lower_bound
  assert bound > case.epsilon, (case.name, bound, case.epsilon)
