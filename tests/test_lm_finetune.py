"""lm_finetune: its corpus, its decoder and one tiny run."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax

from experiments import registry
from experiments.lm_finetune import _corpus
from experiments.lm_finetune import _model
from experiments.lm_finetune import _training

SIZES = dict(public=64, train=64, val=16, test=16)


@pytest.fixture(scope='module')
def corpus():
  return _corpus.load(16, SIZES, seed=0)


def test_the_corpus_splits_by_file_and_never_reads_site_packages(tmp_path):
  for path, text in {'a.py': 'x' * 40, 'site-packages/b.py': 'y' * 40,
                     'test/c.py': 'z' * 40, 'test/d.txt': 'w' * 40,
                     'pkg/__pycache__/e.py': 'v' * 40}.items():
    os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
    (tmp_path / path).write_text(text)
  public, private = _corpus._files(str(tmp_path))  # pylint: disable=protected-access
  assert public == ['a.py'] and private == [os.path.join('test', 'c.py')]


def test_the_private_parts_are_disjoint_files_and_the_draw_is_seeded(corpus):
  paths = _corpus._files(_corpus.sysconfig.get_paths()['stdlib'])[1]  # pylint: disable=protected-access
  parts = {p: _corpus._private_part(p) for p in paths}  # pylint: disable=protected-access
  counts = {k: sum(v == k for v in parts.values())
            for k in ('train', 'val', 'test')}
  assert min(counts.values()) > 0, counts
  assert {k: v.shape for k, v in vars(corpus).items()
          if isinstance(v, np.ndarray)} == {
              k: (n, 17) for k, n in SIZES.items()}
  again = _corpus.load(16, SIZES, seed=0)
  assert again.digest == corpus.digest
  assert _corpus.load(16, SIZES, seed=1).digest != corpus.digest


def test_the_corpus_refuses_missing_parts_and_too_many_windows(tmp_path):
  with pytest.raises(ValueError, match='public, train, val and test'):
    _corpus.load(16, dict(public=1, train=1), seed=0)
  (tmp_path / 'a.py').write_text('x' * 40)
  with pytest.raises(_corpus.CorpusUnavailableError, match='test suite'):
    _corpus.load(16, SIZES, seed=0, root=str(tmp_path))
  with pytest.raises(_corpus.CorpusUnavailableError, match='at least'):
    _corpus.load(16, dict(SIZES, train=10**9), seed=0)


def test_the_decoder_is_causal_tied_and_lora_starts_as_pretrained(corpus):
  model = _model.Decoder(width=8, layers=1, heads=2, max_len=16)
  ids = jnp.asarray(corpus.train[0, :16], jnp.int32)
  params = model.init(jax.random.key(0), ids)['params']
  logits = model.apply({'params': params}, ids)
  later = model.apply({'params': params}, ids.at[10].set((ids[10] + 1) % 256))
  np.testing.assert_array_equal(logits[:10], later[:10])  # causal
  assert not np.allclose(logits[10:], later[10:])
  assert 'embedding' in params and len(
      [k for k in jax.tree_util.tree_leaves_with_path(params)
       if 'out' in str(k[0])]) == 0  # no separate output layer: tied
  lora = _model.Decoder(rank=2, width=8, layers=1, heads=2, max_len=16)
  variables = lora.init(jax.random.key(1), ids)
  assert (jax.tree.structure(variables[_model.FROZEN])
          == jax.tree.structure(params))
  loss = _model.loss_fn(lora, params)
  np.testing.assert_allclose(
      loss(variables['params'], corpus.train[0]),
      _model.loss_fn(model)(params, corpus.train[0]), rtol=1e-6)


def test_ghost_clipping_of_the_decoder_equals_vmap(corpus):
  cfg = registry.get('lm_finetune').configure(
      'quick', width=8, layers=1, heads=2, seq_len=16)
  model = _training.model(cfg, 'full')
  params = model.init(jax.random.key(0), jnp.zeros(16, jnp.int32))['params']
  loss = _model.loss_fn(model)
  batch, mask = jnp.asarray(corpus.train[:6]), jnp.arange(6) < 5
  sums = [jax.jit(dpjax.clipped_grad_sum(loss, 0.01, method))(
      params, batch, mask).grad_sum.value for method in ('vmap', 'ghost')]
  for a, b in zip(*map(jax.tree.leaves, sums)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_a_tiny_run_decides_its_claims(tmp_path):
  exp = registry.get('lm_finetune')
  cfg = exp.configure('quick', num_seeds=2, steps=2, width=8, layers=1,
                      heads=2, seq_len=8, num_public=64, num_train=64,
                      num_val=16, num_test=16, pretrain_steps=2,
                      pretrain_batch_size=16, expected_batch_size=8)
  results = exp.results(cfg, str(tmp_path), progress=False)
  assert len(results['claims']) == 5
  assert {c['verdict'] for c in results['claims']} <= {
      'held', 'refuted', 'inconclusive'}
  record = exp.record.from_dict(results)
  for kind in ('full', 'lora'):
    runs = record.runs[kind]
    assert sorted(runs) == ['1.0', '3.0', '8.0', 'inf']
    for eps in ('1.0', '3.0', '8.0'):
      assert runs[eps].epsilon == pytest.approx(float(eps), rel=1e-3)
      assert len(runs[eps].test_loss) == 2
    assert runs['inf'].epsilon is None and runs['inf'].noise_multiplier == 0
  body = exp.report_body(record, cfg, results['claims'], str(tmp_path))
  assert 'Corpus digest' in body
  assert record.dimensions['lora'] < record.dimensions['full']


def test_the_config_refuses_heads_that_do_not_divide_the_width():
  with pytest.raises(ValueError, match='heads=3 to divide width=32'):
    registry.get('lm_finetune').configure('quick', heads=3)
