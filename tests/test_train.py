"""Training loop, ledger and checkpoint/resume (experiments.common)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap

import chex
import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax import accounting
from experiments.common import checkpoint
from experiments.common import data as data_lib
from experiments.common import models
from experiments.common import train
from experiments.common import train_step

DELTA = 1e-5
CONFIG = dict(steps=20, expected_batch_size=32, learning_rate=0.1,
              momentum=0.9, l2_norm_clip=1.0, noise_multiplier=1.0,
              eval_every=5, checkpoint_every=5, seed=3)


@pytest.fixture(scope='module')
def digits():
  return data_lib.load('digits', seed=0, max_train=256, max_test=128)


@pytest.fixture(scope='module')
def model():
  return models.make_model('logistic', 10, input_shape=(8, 8, 1))


@pytest.fixture(scope='module')
def reference(digits, model):
  """An uninterrupted private run without checkpoints."""
  return train.train(model, digits, train.TrainConfig(**CONFIG), delta=DELTA,
                     progress=False)


def assert_same_params(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_ledger_holds_one_event_per_step(reference, digits):
  sampler = train.make_sampler(train.TrainConfig(**CONFIG), len(digits.x_train))
  assert reference.ledger.runs == [(sampler.dp_event(1.0), CONFIG['steps'])]
  expected = accounting.epsilon(dp_accounting.SelfComposedDpEvent(
      sampler.dp_event(1.0), CONFIG['steps']), DELTA)
  assert reference.final['epsilon'] == pytest.approx(expected, rel=1e-12)
  assert [h['step'] for h in reference.history] == [5, 10, 15, 20]
  eps = [h['epsilon'] for h in reference.history]
  assert eps == sorted(eps) and eps[0] > 0


def test_non_private_run_learns_and_spends_nothing(digits, model):
  cfg = train.TrainConfig(**dict(CONFIG, noise_multiplier=None, steps=40))
  res = train.train(model, digits, cfg, progress=False)
  assert res.ledger.num_events == 0 and res.final['epsilon'] == 0.0
  assert res.final['test_accuracy'] > 0.7  # 10 classes: chance is 0.1


def test_same_seed_is_bit_identical(reference, digits, model):
  again = train.train(model, digits, train.TrainConfig(**CONFIG), delta=DELTA,
                      progress=False)
  assert_same_params(reference.params, again.params)


class Crash(Exception):
  pass


def _crash_at(step):
  def on_step(s):
    if s == step:
      raise Crash()
  return on_step


def test_resume_after_crash_is_bit_identical(reference, digits, model,
                                             tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  with pytest.raises(Crash):
    train.train(model, digits, cfg, delta=DELTA, progress=False,
                checkpoint_dir=str(tmp_path), on_step=_crash_at(13))
  res = train.train(model, digits, cfg, delta=DELTA, progress=False,
                    checkpoint_dir=str(tmp_path))
  assert res.resumed_from == 10
  assert_same_params(reference.params, res.params)
  assert res.ledger == reference.ledger
  assert res.final == reference.final
  assert res.history == reference.history


def test_finished_run_resumes_to_the_same_result(reference, digits, model,
                                                 tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  train.train(model, digits, cfg, delta=DELTA, progress=False,
              checkpoint_dir=str(tmp_path))
  res = train.train(model, digits, cfg, delta=DELTA, progress=False,
                    checkpoint_dir=str(tmp_path))
  assert res.resumed_from == CONFIG['steps']
  assert_same_params(reference.params, res.params)
  assert res.ledger == reference.ledger


WORKER = textwrap.dedent("""
    import json, sys, time
    from experiments.common import data, models, train
    ckpt_dir, cfg = sys.argv[1], json.loads(sys.argv[2])
    ds = data.load('digits', seed=0, max_train=256, max_test=128)
    def on_step(step):
      print(step, flush=True)
      time.sleep(0.3)
    model = models.make_model('logistic', 10, input_shape=ds.input_shape)
    train.train(model, ds, train.TrainConfig(**cfg), delta=1e-5, progress=False,
                checkpoint_dir=ckpt_dir, on_step=on_step)
    print('finished', flush=True)
""")


def test_killed_training_process_resumes_bit_identical(reference, digits,
                                                       model, tmp_path):
  script = tmp_path / 'worker.py'
  script.write_text(WORKER)
  ckpt_dir = tmp_path / 'ckpt'
  proc = subprocess.Popen(
      [sys.executable, str(script), str(ckpt_dir), json.dumps(CONFIG)],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  try:
    for line in proc.stdout:  # wait until step 12 ran: checkpoints 5 and 10
      if line.strip() == '12':
        break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
  finally:
    proc.kill()
  assert proc.returncode == -signal.SIGKILL
  res = train.train(model, digits, train.TrainConfig(**CONFIG), delta=DELTA,
                    progress=False, checkpoint_dir=str(ckpt_dir))
  assert res.resumed_from == 10
  assert_same_params(reference.params, res.params)
  assert res.ledger == reference.ledger
  assert res.final['epsilon'] == reference.final['epsilon']


def _corrupt_state(step_dir):
  """Overwrites every stored array chunk of a checkpoint with junk bytes."""
  hit = 0
  for root, _, files in os.walk(os.path.join(step_dir, 'state')):
    if os.path.basename(root) == 'd':
      for name in files:
        path = os.path.join(root, name)
        size = os.path.getsize(path)
        with open(path, 'wb') as f:
          f.write(b'\x5a' * size)
        hit += 1
  assert hit


def test_corrupt_newest_checkpoint_falls_back_to_older(reference, digits, model,
                                                       tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  train.train(model, digits, cfg, delta=DELTA, progress=False,
              checkpoint_dir=str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ['15', '20']
  _corrupt_state(str(tmp_path / '20'))
  with pytest.warns(UserWarning, match='step 20 .* corrupt'):
    res = train.train(model, digits, cfg, delta=DELTA, progress=False,
                      checkpoint_dir=str(tmp_path))
  assert res.resumed_from == 15
  assert_same_params(reference.params, res.params)
  assert res.ledger == reference.ledger
  assert os.path.isdir(tmp_path / 'corrupt-20')


def test_no_good_checkpoint_refuses_to_restart(digits, model, tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  train.train(model, digits, cfg, delta=DELTA, progress=False,
              checkpoint_dir=str(tmp_path))
  for step in ('15', '20'):
    _corrupt_state(str(tmp_path / step))
  with pytest.warns(UserWarning):
    with pytest.raises(checkpoint.CheckpointError, match='refusing to restart'):
      train.train(model, digits, cfg, delta=DELTA, progress=False,
                  checkpoint_dir=str(tmp_path))


def test_ledger_that_disagrees_with_the_step_is_rejected(digits, model,
                                                         tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  train.train(model, digits, cfg, delta=DELTA, progress=False,
              checkpoint_dir=str(tmp_path))
  meta_path = tmp_path / '20' / 'meta' / 'metadata'
  meta = json.loads(meta_path.read_text())
  ledger = accounting.PrivacyLedger.from_json(meta['ledgers'][0])
  event = ledger.runs[0][0]
  meta['ledgers'] = [accounting.PrivacyLedger([(event, 3)]).to_json()]
  meta_path.write_text(json.dumps(meta))
  with pytest.raises(checkpoint.CheckpointError, match='3 events'):
    train.train(model, digits, cfg, delta=DELTA, progress=False,
                checkpoint_dir=str(tmp_path))


def test_other_configuration_is_not_resumed(digits, model, tmp_path):
  cfg = train.TrainConfig(**CONFIG)
  train.train(model, digits, train.TrainConfig(**dict(CONFIG, steps=5)),
              delta=DELTA, progress=False, checkpoint_dir=str(tmp_path))
  with pytest.raises(checkpoint.CheckpointError, match='another configuration'):
    train.train(model, digits, cfg, delta=DELTA, progress=False,
                checkpoint_dir=str(tmp_path))


@pytest.mark.parametrize('bad, match', [
    (dict(steps=0), 'steps=0'),
    (dict(learning_rate=-1.0), 'learning_rate=-1.0'),
    (dict(noise_multiplier=-0.5), 'noise_multiplier=-0.5'),
    (dict(l2_norm_clip=0.0), 'l2_norm_clip=0.0'),
])
def test_bad_config_raises(bad, match):
  with pytest.raises(ValueError, match=match):
    train.TrainConfig(**dict(CONFIG, **bad))


def test_batch_larger_than_data_raises(digits, model):
  cfg = train.TrainConfig(**dict(CONFIG, expected_batch_size=10_000))
  with pytest.raises(ValueError, match='expected_batch_size=10000'):
    train.train(model, digits, cfg, progress=False)


def test_sparsified_run_spends_exactly_what_plain_dpsgd_spends(reference,
                                                                digits, model):
  rs = train.train(model, digits, train.TrainConfig(
      **dict(CONFIG, sparsify_rate=0.7)), delta=DELTA, progress=False)
  assert rs.ledger == reference.ledger  # the mask is data-independent
  assert rs.final['epsilon'] == reference.final['epsilon']
  assert not np.array_equal(np.asarray(jax.tree.leaves(rs.params)[0]),
                            np.asarray(jax.tree.leaves(reference.params)[0]))


@pytest.mark.parametrize('ablation, sigma', [
    (None, 2.0), ('clipped_sgd', None), ('noisy_sgd', 2.0)])
def test_masked_coordinates_do_not_move_within_an_epoch(digits, model,
                                                        ablation, sigma):
  cfg = train.TrainConfig(**dict(CONFIG, momentum=0.0, sparsify_rate=0.6,
                                 noise_multiplier=sigma, ablation=ablation,
                                 steps=16))  # 2 epochs of 8 steps
  params = model.init(jax.random.key(0), digits.x_train[0])
  stacked = jax.tree.map(lambda x: x[None], params)  # one seed
  state, step = train_step._make_step(model, cfg, digits, stacked,
                                      (cfg.seed,))
  history = [params]
  for t in range(16):
    if t == 8:  # epoch 1's mask, as the chain's state holds it for step 8
      epoch_1 = jax.tree.map(lambda x: x[0],
                             dpjax.transforms.next_sparsity_mask(state))
    stacked, state, _ = step(stacked, state, jnp.int32(t))
    history.append(jax.tree.map(lambda x: x[0], stacked))
  flat = lambda p: np.concatenate([np.ravel(x) for x in jax.tree.leaves(p)])
  kept = flat(epoch_1) == 1
  assert kept.sum() == kept.size - int(0.6 * kept.size)  # epoch 1 keeps 40 %
  moved = flat(history[16]) != flat(history[8])
  assert not np.any(moved & ~kept)  # no gradient, no noise where masked
  if sigma is not None:  # noise reaches every kept coordinate
    np.testing.assert_array_equal(moved, kept)
    assert np.all(flat(history[8]) != flat(history[0]))  # epoch 0 is dense


def test_ablation_configuration_is_checked():
  with pytest.raises(ValueError, match='noisy_sgd needs a noise'):
    train.TrainConfig(**dict(CONFIG, ablation='noisy_sgd',
                             noise_multiplier=None))
  with pytest.raises(ValueError, match='sparsify_rate=1.0'):
    train.TrainConfig(**dict(CONFIG, sparsify_rate=1.0))
  assert not train.TrainConfig(**dict(CONFIG, ablation='noisy_sgd')).private


@pytest.mark.parametrize('seeds_as', ['vmap', 'map'])
def test_seeds_in_one_program_are_the_single_seed_runs(digits, model,
                                                       seeds_as):
  """Seeds trained as one program give each seed's own run."""
  cfg = train.TrainConfig(**dict(CONFIG, checkpoint_every=0))
  together = train.train_seeds(model, digits, cfg, (3, 7), delta=DELTA,
                               progress=False, seeds_as=seeds_as)
  for seed, res in zip((3, 7), together):
    alone = train.train(model, digits, dataclasses.replace(cfg, seed=seed),
                        delta=DELTA, progress=False)
    chex.assert_trees_all_close(res.params, alone.params, rtol=1e-5,
                                atol=1e-6)
    assert res.ledger.runs == alone.ledger.runs
    assert res.ledger.noise_spent == alone.ledger.noise_spent
  assert not np.allclose(jax.tree.leaves(together[0].params)[0],
                         jax.tree.leaves(together[1].params)[0])
  with pytest.raises(ValueError, match='distinct seeds'):
    train.train_seeds(model, digits, cfg, (1, 1), progress=False)
  with pytest.raises(ValueError, match='seeds_as'):
    train.train_seeds(model, digits, cfg, (1, 2), progress=False,
                      seeds_as='pmap')


def test_seeds_share_one_epsilon_computation_and_score_validation(
    digits, model, tmp_path, monkeypatch):
  # The seeds' ledgers hold identical events: each accountant runs once per
  # distinct event in the process, not once per seed or per run. A
  # validation split is scored too.
  calls = []
  real = accounting.PrivacyLedger.epsilon
  monkeypatch.setattr(accounting.PrivacyLedger, 'epsilon',
                      lambda self, *a: calls.append(a) or real(self, *a))
  monkeypatch.setattr(train, '_EPSILONS', {})
  held = data_lib.with_validation(digits, 0.25, seed=0)
  cfg = train.TrainConfig(**dict(CONFIG, steps=4, eval_every=2))
  rows = train.run_seeds_and_record(model, held, cfg, (0, 1, 2), delta=DELTA,
                                    out_dir=str(tmp_path), label='memo',
                                    progress=False)
  assert len({r['epsilon_pld'] for r in rows}) == 1
  assert sum('pld' in a for a in calls) == 1
  # rdp after 2 and 4 steps (the evaluations; the final rdp is step 4's),
  # then pld.
  assert len(calls) == 2 + 1
  # Another run spending the same events (a sweep's next sparsification
  # rate) computes nothing; one with another sigma does.
  again = train.run_seeds_and_record(model, held, cfg, (0, 1, 2),
                                     delta=DELTA, out_dir=str(tmp_path),
                                     label='memo-again', progress=False)
  assert len(calls) == 3
  assert again[0]['epsilon_pld'] == rows[0]['epsilon_pld']
  other = dataclasses.replace(cfg, noise_multiplier=2 * cfg.noise_multiplier)
  train.run_seeds_and_record(model, held, other, (0, 1, 2), delta=DELTA,
                             out_dir=str(tmp_path), label='memo-other',
                             progress=False)
  assert len(calls) == 3 + 3
  assert all(0 <= r['val_accuracy'] <= 1 and 'val_loss' in r for r in rows)
