"""PrivacyLedger refuses records that would void or undercount a guarantee.

Fresh batches (a sampler key and step recorded once, amplified events only
with their batch and noise) and one neighbouring relation per ledger.
"""

import dp_accounting
import jax
import pytest

import dpjax
from dpjax import accounting

NR = dp_accounting.NeighboringRelation
BATCH_KEY, NOISE_KEY = jax.random.key(3), jax.random.key(2)
TINY_SWOR = dp_accounting.SampledWithoutReplacementDpEvent(
    1000, 1, dp_accounting.GaussianDpEvent(100.0))


# ------------------------------------------------------- item 8: fresh batches


def test_a_sampler_key_reused_every_step_is_refused():
  """Before: one batch drawn, 100 amplified steps recorded (eps 1.21, true
  80.6), since the ledger never saw the batch."""
  sampler = dpjax.PoissonSampler(1000, 0.01)
  event = sampler.dp_event(1.0)
  ledger = dpjax.PrivacyLedger()
  ledger.record(event, batch=sampler.sample(BATCH_KEY, 0),
                noise=(NOISE_KEY, 0))
  with pytest.raises(ValueError, match='batch=.*already spent'):
    ledger.record(event, batch=sampler.sample(BATCH_KEY, 0),
                  noise=(NOISE_KEY, 1))
  for t in range(1, 4):  # batch t of the key: accepted
    ledger.record(event, batch=sampler.sample(BATCH_KEY, t),
                  noise=(NOISE_KEY, t))
  assert list(ledger.batches_spent.values()) == [[(0, 4)]]
  with pytest.raises(ValueError, match='batch=.*already spent'):
    ledger.record(event, 2, batch=(BATCH_KEY, 3), noise=(NOISE_KEY, 4))
  restored = dpjax.PrivacyLedger.from_json(ledger.to_json())
  assert restored == ledger and restored.num_events == 4
  with pytest.raises(ValueError, match='batch=.*already spent'):
    restored.record(event, batch=(BATCH_KEY, 2), noise=(NOISE_KEY, 9))


def test_an_amplified_record_needs_its_batch_and_its_noise():
  """Before: ``record(event)`` accepted an amplified event unchecked."""
  sampler = dpjax.sampling.FixedSizeSampler(100, 10)
  event = sampler.dp_event(1.0)
  batch = sampler.sample(BATCH_KEY, 0)
  ledger = dpjax.PrivacyLedger()
  with pytest.raises(ValueError, match='batch= is required'):
    ledger.record(event)
  with pytest.raises(ValueError, match='batch= is required'):
    ledger.record(event, noise=(NOISE_KEY, 0))
  with pytest.raises(ValueError, match='noise= is required'):
    ledger.record(event, batch=batch)
  unstamped = dpjax.sampling.PaddedBatch(batch.indices, batch.mask,
                                         batch.num_sampled)
  with pytest.raises(ValueError, match='batch= carries no'):
    ledger.record(event, batch=unstamped, noise=(NOISE_KEY, 0))
  assert ledger.num_events == 0 and not ledger.noise_spent  # nothing changed
  ledger.record(event, batch=batch, noise=(NOISE_KEY, 0))
  ledger.record(event, 5, planned=True)  # an accounting plan, stated
  assert ledger.num_events == 6 and ledger.planned == 5
  assert dpjax.PrivacyLedger.from_json(ledger.to_json()).planned == 5
  ledger.record(accounting.replace_one_event(  # not amplified
      accounting.gaussian_event(1.0)), neighboring_relation=NR.REPLACE_ONE,
                noise=(NOISE_KEY, 1))


def test_one_key_for_batches_and_noise_is_refused():
  sampler = dpjax.PoissonSampler(1000, 0.01)
  event = sampler.dp_event(1.0)
  ledger = dpjax.PrivacyLedger()
  with pytest.raises(ValueError, match='batch=: the batch key is the noise'):
    ledger.record(event, batch=sampler.sample(NOISE_KEY, 0),
                  noise=(NOISE_KEY, 0))
  ledger.record(event, batch=(BATCH_KEY, 0), noise=(NOISE_KEY, 0))
  with pytest.raises(ValueError, match='noise=: key .* batch key'):
    ledger.record(event, batch=(jax.random.key(9), 0), noise=(BATCH_KEY, 1))


def test_a_vmapped_batch_must_be_indexed_per_run():
  sampler = dpjax.PoissonSampler(1000, 0.01)
  batches = jax.vmap(sampler.sample, in_axes=(None, 0))(
      BATCH_KEY, jax.numpy.arange(2))
  with pytest.raises(ValueError, match='index the run'):
    dpjax.PrivacyLedger().record(sampler.dp_event(1.0), batch=batches,
                                 noise=(NOISE_KEY, 0))


def test_a_noisy_record_without_its_noise_is_refused_unless_stated():
  """Before: ``record(event)`` of a non-amplified event skipped the replay
  check silently, so one noise draw could be recorded twice."""
  ledger = dpjax.PrivacyLedger()
  for event in (accounting.pure_dp_event(1.0),
                accounting.gaussian_event(1.0),
                dp_accounting.SelfComposedDpEvent(
                    accounting.laplace_event(0.5), 3)):
    with pytest.raises(ValueError, match='noise= is required'):
      ledger.record(event)
    with pytest.raises(ValueError, match='noise= is required'):
      ledger.record(event, 0)  # refused even when it counts nothing
  assert ledger.num_events == 0 and ledger.planned == 0
  ledger.record(accounting.pure_dp_event(1.0), noise=(NOISE_KEY, 0))
  with pytest.raises(ValueError, match='already spent'):
    ledger.record(accounting.pure_dp_event(1.0), noise=(NOISE_KEY, 0))
  ledger.record(accounting.pure_dp_event(1.0), 2, planned=True)  # recorded
  assert ledger.num_events == 3 and ledger.planned == 2
  assert dpjax.PrivacyLedger.from_json(ledger.to_json()).planned == 2
  for quiet in (dp_accounting.NoOpDpEvent(), dp_accounting.NonPrivateDpEvent()):
    assert not accounting.draws_noise(quiet)
    dpjax.PrivacyLedger().record(quiet)  # no noise to replay


# ------------------------------------------- item 11: one neighbouring relation


def test_a_second_relation_is_refused():
  """Before: one replace-one event made the whole ledger replace-one and an
  add/remove epsilon = 1 release counted as 1.004 (true: at least 2)."""
  ledger = dpjax.PrivacyLedger()
  ledger.record(accounting.pure_dp_event(1.0), noise=(NOISE_KEY, 0))
  assert ledger.neighboring_relation == NR.ADD_OR_REMOVE_ONE
  with pytest.raises(ValueError, match='neighboring_relation: .*REPLACE_ONE'):
    ledger.record(TINY_SWOR, planned=True)
  with pytest.raises(ValueError, match='neighboring_relation'):
    ledger.record(accounting.pure_dp_event(1.0),
                  neighboring_relation=NR.REPLACE_ONE)
  assert ledger.num_events == 1
  replace_one = dpjax.PrivacyLedger(neighboring_relation=NR.REPLACE_ONE)
  with pytest.raises(ValueError, match='replace_one_event'):
    replace_one.record(accounting.pure_dp_event(1.0))  # inferred add/remove
  first = dpjax.PrivacyLedger()
  first.record(TINY_SWOR, planned=True)  # the first record sets it
  assert first.neighboring_relation == NR.REPLACE_ONE
  with pytest.raises(ValueError, match='neighboring_relation'):
    first.record(accounting.pure_dp_event(1.0))


def test_a_converted_release_is_never_undercounted():
  ledger = dpjax.PrivacyLedger(neighboring_relation=NR.REPLACE_ONE)
  ledger.record(accounting.replace_one_event(accounting.pure_dp_event(1.0)),
                neighboring_relation=NR.REPLACE_ONE, noise=(NOISE_KEY, 0))
  ledger.record(TINY_SWOR, planned=True)
  assert ledger.epsilon(1e-5) >= 2.0  # group privacy: a replace is two steps
  restored = dpjax.PrivacyLedger.from_json(ledger.to_json())
  assert restored == ledger and restored.neighboring_relation == NR.REPLACE_ONE
  assert restored.epsilon(1e-5) == ledger.epsilon(1e-5)


@pytest.mark.parametrize('event', [
    accounting.pure_dp_event(0.7),
    accounting.EpsilonDeltaDpEvent(0.5, 1e-7),
    accounting.laplace_event(0.3),
    dp_accounting.GaussianDpEvent(2.0),
    accounting.discrete_gaussian_event(3.0),
    dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(5.0),
                                          10),
        accounting.laplace_event(0.1)]),
], ids=lambda e: type(e).__name__)
def test_replace_one_epsilon_is_at_least_the_add_remove_one(event):
  converted = accounting.replace_one_event(event)
  for name in ('rdp', 'pld'):
    if (name == 'pld' and isinstance(event, dp_accounting.ZCDpEvent)) or (
        name == 'rdp' and getattr(event, 'delta', 0) > 0):
      continue  # the accountant has no bound for it
    add_remove = accounting.epsilon(event, 1e-5, name)
    replace = accounting.epsilon(converted, 1e-5, name,
                                 neighboring_relation=NR.REPLACE_ONE)
    assert replace >= add_remove


def test_replace_one_event_of_pure_dp_is_group_privacy():
  assert accounting.replace_one_event(
      accounting.EpsilonDeltaDpEvent(1.0, 1e-6)) == (
          accounting.EpsilonDeltaDpEvent(2.0, (1 + 2.718281828459045) * 1e-6))
  with pytest.raises(ValueError, match='event: no replace-one conversion'):
    accounting.replace_one_event(accounting.gaussian_event(1.0, sampling_rate=0.01))
