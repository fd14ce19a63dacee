"""Every client protocol is its encoder, a secure sum and its decoder."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import accounting
from dpjax import distributed
from dpjax.distributed import protocols

N, D, DELTA = 4, 5, 1e-5
CPSGD = distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=400)
CPSGD_ROT = distributed.CpsgdConfig(l2_norm_clip=1.0, levels=16, trials=400,
                                    linf_clip=0.8,
                                    rotate=True)
DDG = distributed.DistributedDpConfig(mechanism='ddg', l2_norm_clip=1.0,
                                      bits=16, gamma=1e-3, stddev=0.1,
                                      num_clients=N)
SKELLAM = distributed.DistributedDpConfig(mechanism='skellam',
                                          l2_norm_clip=1.0, bits=16,
                                          gamma=1e-3, stddev=0.1,
                                          num_clients=N)

# (protocol, its event, its bits, exact): integer sums decode bit-identically.
CASES = {
    'cpsgd': (lambda: protocols.cpsgd_protocol(CPSGD, D, N, DELTA),
              lambda: distributed.cpsgd_event(CPSGD, D, N, DELTA),
              lambda: distributed.cpsgd_bits(CPSGD, D), True),
    'cpsgd_rotated': (
        lambda: protocols.cpsgd_protocol(CPSGD_ROT, D, N, DELTA),
        lambda: distributed.cpsgd_event(CPSGD_ROT, D, N, DELTA),
        lambda: distributed.cpsgd_bits(CPSGD_ROT, D), True),
    'ddg': (lambda: protocols.distributed_dp_protocol(DDG, D),
            lambda: distributed.distributed_dp_event(DDG, D),
            lambda: distributed.distributed_dp_bits(DDG, D), True),
    'skellam': (lambda: protocols.distributed_dp_protocol(SKELLAM, D),
                lambda: distributed.distributed_dp_event(SKELLAM, D),
                lambda: distributed.distributed_dp_bits(SKELLAM, D), True),
    'gaussian': (
        lambda: protocols.gaussian_distributed_mean_protocol(1.0, 0.3, N, D),
        lambda: accounting.gaussian_event(math.sqrt(N) * 0.3 / (2 * 1.0)),
        lambda: distributed.gaussian_protocol_bits(D), False),
    'plain': (lambda: protocols.plain_mean_protocol(N, D), lambda: None,
              lambda: 32 * D, False),
}


def _clients():
  """Client vectors, one not finite (clipping zeroes it; a plain mean keeps
  the NaN): encode and mean must treat it alike."""
  xs = jax.random.normal(jax.random.key(7), (N, D)) * 0.6
  return xs.at[1, 2].set(jnp.nan)


@pytest.mark.parametrize('name', sorted(CASES))
def test_decode_of_the_summed_messages_is_the_mean(name):
  make, _, _, exact = CASES[name]
  p, xs, key = make(), _clients(), jax.random.key(3)
  messages = jax.vmap(lambda i, x: p.encode(key, i, x, p.param))(
      jnp.arange(N), xs)
  got = p.decode(key, jnp.sum(messages, axis=0), p.param)
  want = p.mean(key, xs, p.param)
  assert got.shape == want.shape == (D,)
  if exact:
    np.testing.assert_array_equal(got, want)
  else:
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('name', sorted(CASES))
def test_event_and_bits_are_the_mechanisms(name):
  make, event, bits, _ = CASES[name]
  p = make()
  assert p.event == event()
  assert p.bits_per_client == bits()


@pytest.mark.parametrize('config', [DDG, SKELLAM], ids=['ddg', 'skellam'])
def test_distributed_dp_protocol_states_its_neighbouring_relation(config):
  replace = protocols.distributed_dp_protocol(config, D, replace_one=True)
  assert replace.event == distributed.distributed_dp_event(config, D,
                                                           replace_one=True)
  assert replace.event != protocols.distributed_dp_protocol(config, D).event


def test_a_new_round_key_gives_a_new_message():
  p = protocols.gaussian_distributed_mean_protocol(1.0, 0.3, N, D)
  xs = _clients()
  a = p.encode(jax.random.key(0), 0, xs[0], p.param)
  b = p.encode(jax.random.key(1), 0, xs[0], p.param)
  assert not np.array_equal(a, b)


def test_the_gaussian_protocol_without_noise_has_no_event():
  assert protocols.gaussian_distributed_mean_protocol(1.0, 0.0, N, D).event \
      is None


@pytest.mark.parametrize('make, arg', [
    (lambda: protocols.plain_mean_protocol(N, 0), 'dimension'),
    (lambda: protocols.plain_mean_protocol(0, D), 'num_clients'),
    (lambda: protocols.gaussian_distributed_mean_protocol(1.0, -1.0, N, D),
     'stddev'),
    (lambda: protocols.gaussian_distributed_mean_protocol(0.0, 1.0, N, D),
     'l2_norm_clip'),
])
def test_bad_hyperparameters_are_refused_by_name(make, arg):
  with pytest.raises(ValueError, match=arg):
    make()

