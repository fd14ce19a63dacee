"""Stochastic quantizers: unbiasedness, variance, clamping, codes, validation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax

QUANTIZERS = {
    'low_precision': dpjax.compression.low_precision_quantizer(eta=0.1, bits=4),
    'k_level': dpjax.compression.k_level_quantizer(x_max=1.0, levels=5),
}



def test_grids_match_the_papers():
  q = dpjax.compression.low_precision_quantizer(eta=0.5, bits=3)
  assert (q.code_min, q.code_max, q.bits_per_coordinate) == (-4, 3, 3)
  assert (q.low, q.high) == (-2.0, 1.5)
  k = dpjax.compression.k_level_quantizer(x_max=2.0, levels=9)
  assert k.spacing == 0.5 and k.low == -2.0 and k.high == 2.0
  assert k.bits_per_coordinate == 4 and k.levels == 9
  np.testing.assert_allclose(k.dequantize(jnp.arange(9)),
                             np.linspace(-2, 2, 9))
  assert dpjax.compression.k_level_quantizer(1.0, 2).bits_per_coordinate == 1


@pytest.mark.parametrize('name', sorted(QUANTIZERS))
def test_unbiased_inside_the_range_with_variance_below_s2_over_4(name):
  q = QUANTIZERS[name]
  draws = 20_000
  x = jnp.linspace(q.low, q.high, 37)  # includes both ends and off-grid points
  keys = jax.random.split(jax.random.key(0), draws)
  codes = jax.jit(jax.vmap(lambda k: q.quantize(x, key=k)))(keys)
  assert codes.dtype == jnp.int32
  assert int(codes.min()) >= q.code_min and int(codes.max()) <= q.code_max
  values = np.asarray(q.dequantize(codes), np.float64)
  mean, var = values.mean(0), values.var(0)
  s = q.spacing
  # Each coordinate is a two-point variable with variance <= s^2 / 4.
  assert np.all(np.abs(mean - np.asarray(x)) <= 5 * math.sqrt(s**2 / 4 / draws)
                + 1e-6)
  assert np.all(var <= s**2 / 4 * (1 + 5 * math.sqrt(2 / draws)) + 1e-9)
  # Values on the grid are returned unchanged.
  on_grid = q.dequantize(jnp.arange(q.code_min, q.code_max + 1))
  np.testing.assert_array_equal(
      q.quantize(on_grid, key=jax.random.key(1)),
      np.arange(q.code_min, q.code_max + 1))


@pytest.mark.parametrize('name', sorted(QUANTIZERS))
def test_values_outside_the_range_are_clamped(name):
  q = QUANTIZERS[name]
  x = jnp.array([q.low - 5.0, q.high + 5.0, -1e9, 1e9])
  codes = q.quantize(x, key=jax.random.key(0))
  np.testing.assert_array_equal(codes, [q.code_min, q.code_max, q.code_min,
                                        q.code_max])


def test_quantize_is_a_pure_function_of_the_key_with_and_without_jit():
  q = QUANTIZERS['low_precision']
  x = jax.random.normal(jax.random.key(0), (100,)) * 0.3
  a = q.quantize(x, key=jax.random.key(5))
  b = jax.jit(lambda k: q.quantize(x, key=k))(jax.random.key(5))
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, q.quantize(x, key=jax.random.key(6)))


def test_stochastic_round_probability_matches_the_fraction():
  codes = dpjax.compression.stochastic_round(jnp.full((100_000,), 2.3),
                                 key=jax.random.key(0), spacing=1.0)
  frac_up = float(jnp.mean(codes == 3))
  assert set(np.unique(codes).tolist()) == {2, 3}
  assert abs(frac_up - 0.3) < 5 * math.sqrt(0.3 * 0.7 / 100_000)


def test_quantizers_reject_bad_arguments_naming_the_value():
  with pytest.raises(ValueError, match='eta=0'):
    dpjax.compression.low_precision_quantizer(eta=0, bits=4)
  with pytest.raises(ValueError, match='bits=0'):
    dpjax.compression.low_precision_quantizer(eta=0.1, bits=0)
  with pytest.raises(ValueError, match='bits=40'):
    dpjax.compression.low_precision_quantizer(eta=0.1, bits=40)
  with pytest.raises(ValueError, match='x_max=-1'):
    dpjax.compression.k_level_quantizer(x_max=-1, levels=4)
  with pytest.raises(ValueError, match='levels=1'):
    dpjax.compression.k_level_quantizer(x_max=1.0, levels=1)
  with pytest.raises(ValueError, match='spacing=-2'):
    dpjax.compression.stochastic_round(jnp.ones(2), key=jax.random.key(0), spacing=-2)
  with pytest.raises(ValueError, match='key'):
    QUANTIZERS['k_level'].quantize(jnp.ones(2), key=None)
