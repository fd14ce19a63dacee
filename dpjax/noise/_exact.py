"""Exact integer machinery of the discrete samplers (private).

Every accept/reject decision is an exact comparison of uniform 32-bit words
with integers or rationals (uint32/int32 arithmetic; JAX's x64 stays off);
no float enters a decision. The rejection sampler of ``ExpParams`` runs as a
vectorized state machine (one or two decisions per lane per step) in a
``lax.while_loop`` work queue that redraws only the lanes still running.

Example:
  >>> p = ExpParams(tau=0, v_max=1000, k=0, c2=0, c1=1, c0=0)  # DLap(1)
  >>> exact_sample(p, jax.random.key(0), (3,)).dtype
  dtype('int32')
"""

import fractions
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import _validate

_Fraction = fractions.Fraction

# Bernoulli(exp(-1)) from one 32-bit word w (see `_bern_exp_minus_one`).
_FACT = [math.factorial(m) for m in range(13)]
_FLOORS = [2**32 // _FACT[m] for m in range(2, 13)]  # floor(2^32 / m!)
# 2^32 / 13! reduced: the conditional chance of U < 1/13! given w = 0.
_TAIL_NUM, _TAIL_DEN = 4194304, 6081075
assert _Fraction(2**32, math.factorial(13)) == _Fraction(_TAIL_NUM, _TAIL_DEN)


class ExpParams(NamedTuple):
  """Static parameters of one exact rejection sampler (Python ints).

  Proposal: V ~ Geometric (P(V = v) = (1 - e^-1) e^-v), U ~ Uniform{0..t-1}
  with t = 2^tau, a fair sign, z = t V + U (a negative zero is rejected, and
  so is V > v_max). Acceptance: Bernoulli(exp(-E)) with the exact dyadic
  E(z, V) = (c2 z^2 + c1 z + c0) / 2^k - V >= 0.
  """
  tau: int
  v_max: int
  k: int
  c2: int
  c1: int
  c0: int


# --- exact 96-bit unsigned arithmetic on uint32 words ------------------------

_M16 = np.uint32(0xFFFF)


def _u32(c: int):
  return np.uint32(c)


def _mul_wide(a, b) -> tuple[jax.Array, jax.Array]:
  """(hi, lo) words of the 64-bit product of two uint32 values (exact)."""
  al, ah = a & _M16, a >> _u32(16)
  bl, bh = b & _M16, b >> _u32(16)
  p0, p1, p2, p3 = al * bl, al * bh, ah * bl, ah * bh
  mid = (p0 >> _u32(16)) + (p1 & _M16) + (p2 & _M16)
  lo = (p0 & _M16) | (mid << _u32(16))
  hi = p3 + (p1 >> _u32(16)) + (p2 >> _u32(16)) + (mid >> _u32(16))
  return hi, lo


def _add3(x, y):
  """x + y for 96-bit numbers as [w0, w1, w2] (mod 2^96)."""
  s0 = x[0] + y[0]
  c0 = (s0 < x[0]).astype(jnp.uint32)
  t = x[1] + y[1]
  s1 = t + c0
  c1 = ((t < x[1]) | (s1 < t)).astype(jnp.uint32)
  return [s0, s1, x[2] + y[2] + c1]


def _sub3(x, y):
  """x - y for 96-bit numbers, x >= y."""
  b0 = (x[0] < y[0]).astype(jnp.uint32)
  t = x[1] - y[1]
  d1 = t - b0
  b1 = ((x[1] < y[1]) | (t < b0)).astype(jnp.uint32)
  return [x[0] - y[0], d1, x[2] - y[2] - b1]


def _const3(c: int, like: jax.Array):
  return [jnp.full_like(like, (c >> (32 * i)) & 0xFFFFFFFF, jnp.uint32)
          for i in range(3)]


def _shl3(v: jax.Array, k: int):
  """v << k as 96 bits, for v < 2^32 and 0 <= k <= 64 (static k)."""
  zero = jnp.zeros_like(v)
  q, r = divmod(k, 32)
  words = [zero, zero, zero]
  words[q] = v << _u32(r) if r else v
  if r and q + 1 < 3:
    words[q + 1] = v >> _u32(32 - r)
  return words


def _word_at(x, pos: int, like: jax.Array) -> jax.Array:
  """Bits [pos, pos + 32) of the 96-bit x (bits below 0 read as 0)."""
  if pos <= -32:
    return jnp.zeros_like(like)
  if pos < 0:
    return x[0] << _u32(-pos)
  q, r = divmod(pos, 32)
  out = x[q] >> _u32(r) if r else x[q]
  if r and q + 1 < 3:
    out = out | (x[q + 1] << _u32(32 - r))
  return out


def _exponent(p: ExpParams, v: jax.Array,
              u: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """floor(E) (int32) and frac(E) * 2^64 as (hi, lo) uint32 words, exactly.

  E * 2^k = c2 z^2 + c1 z + c0 - V 2^k < 2^94 is evaluated in 96-bit integer
  arithmetic on uint32 words (``_mul_wide`` splits into 16-bit halves).
  """
  z = ((v << p.tau) + u).astype(jnp.uint32)
  num = _const3(p.c0, z)
  if p.c2:
    s1, s0 = _mul_wide(z, z)  # z^2 < 2^62
    c = _u32(p.c2)
    a1, a0 = _mul_wide(s0, c)
    b1, b0 = _mul_wide(s1, c)
    num = _add3(num, _add3([a0, a1, jnp.zeros_like(z)],
                           [jnp.zeros_like(z), b0, b1]))
  if p.c1:
    d1, d0 = _mul_wide(z, _u32(p.c1))
    num = _add3(num, [d0, d1, jnp.zeros_like(z)])
  num = _sub3(num, _shl3(v.astype(jnp.uint32), p.k))
  whole = (_word_at(num, p.k, z) & _u32(0x7FFFFFFF)).astype(jnp.int32)
  return whole, _word_at(num, p.k - 32, z), _word_at(num, p.k - 64, z)


# --- the state machine -------------------------------------------------------

# Phases of one lane. START: V is final, the exponent is read this step.
_PROPOSE, _GEO, _START, _EINT, _EFRAC, _DONE = 0, 1, 2, 3, 4, 5


class _Lanes(NamedTuple):
  phase: jax.Array  # int32, one of _PROPOSE.._DONE
  u: jax.Array  # int32 in [0, t)
  neg: jax.Array  # bool sign
  v: jax.Array  # int32 geometric count
  nint: jax.Array  # int32 Bernoulli(e^-1) trials left for floor(E)
  kk: jax.Array  # int32 K of the Bernoulli(exp(-frac)) loop
  tie: jax.Array  # bool: Bernoulli(frac / kk) fell on its ambiguous word
  pend: jax.Array  # int32 0: none, 1: resolve cell pm, 2: tail at m* >= pm
  pm: jax.Array  # int32


def _fresh_lanes(n: int) -> _Lanes:
  zi = jnp.zeros((n,), jnp.int32)
  zb = jnp.zeros((n,), bool)
  return _Lanes(zi, zi, zb, zi, zi, zi + 1, zb, zi, zi)


def _lane_value(p: ExpParams, s: _Lanes) -> jax.Array:
  z = (s.v << p.tau) + s.u
  return jnp.where(s.neg, -z, z)


# Inversion table for Bernoulli(exp(-1)): with c = #{m in 2..12 : w < FL[m]},
# the only word of that count that can be ambiguous is _AMBIGUOUS[c].
_AMBIGUOUS = np.array([0] + _FLOORS[1:11] + [0], np.uint32)


def _bern_exp_minus_one(w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Bernoulli(exp(-1)) from one uniform 32-bit word, by exact inversion.

  The loop of Canonne et al. (Alg. 1) for Bernoulli(exp(-1)) ends at
  K = m* + 1 with P(m* >= m) = 1/m!, and returns 1 iff m* is even. With
  U = (w + theta) / 2^32 uniform, m* = max{m : U < 1/m!}. The word w decides
  every comparison except on 11 words: w = floor(2^32 / m!) for m = 3..12,
  where m* is m or m - 1 (kind 1), and w = 0, where m* >= 12 (kind 2). Those
  are resolved exactly by further words (``_resolve``).

  Returns:
    (value, kind in {0, 1, 2}, m: the cell's m for kind 1, 12 for kind 2).
  """
  count = jnp.zeros(w.shape, jnp.int32)
  for f in _FLOORS:
    count = count + (w < _u32(f)).astype(jnp.int32)
  amb = w == jnp.asarray(_AMBIGUOUS)[count]
  kind = jnp.where(amb, jnp.where(count == 11, 2, 1), 0)
  # m* = 1 + count is even; kind 1: m* in {m - 1, m}; kind 2: m* >= 12.
  return (count % 2) == 1, kind, jnp.minimum(count + 2, 12)


_FACT_U32 = np.array(_FACT, np.uint32)
_REM_U32 = np.array([2**32 % f for f in _FACT], np.uint32)


def _uniform_below(w: jax.Array, den: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(ok, w % den): w % den is uniform on [0, den) given ok (else redraw)."""
  return w >= (_u32(0) - den) % den, w % den


def _resolve(p: ExpParams, s: _Lanes, w0: jax.Array, w1: jax.Array):
  """Exact resolution of the rare ambiguous words (see ``_step``).

  Pending Bernoulli(exp(-1)) (``pend`` 1): m* = pm iff U' < (2^32 mod pm!) /
  pm!, U' a fresh uniform; (``pend`` 2): m* >= 13 w.p. 2^32 / 13!, then
  m* >= m + 1 w.p. 1 / (m + 1). Tied Bernoulli(frac / K): success iff
  J < rho or (J = rho and w0 < flo), with J uniform on [0, K) and
  rho = fhi mod K.

  Returns:
    Packed flags (bit 0 known, 1 value, 2 tie known, 3 tie value, 4-5 the
    new pend) and the new pm.
  """
  pm = jnp.clip(s.pm, 0, 12)
  first = s.pm == 12
  den = jnp.where(s.pend == 1, jnp.asarray(_FACT_U32)[pm],
                  jnp.where(first, _u32(_TAIL_DEN),
                            (s.pm + 1).astype(jnp.uint32)))
  num = jnp.where(s.pend == 1, jnp.asarray(_REM_U32)[pm],
                  jnp.where(first, _u32(_TAIL_NUM), _u32(1)))
  ok, r = _uniform_below(w1, jnp.maximum(den, _u32(1)))
  hit = r < num
  pending = s.pend != 0
  known = pending & ok & ((s.pend == 1) | ~hit)
  m_star = jnp.where(s.pend == 1, jnp.where(hit, s.pm, s.pm - 1), s.pm)
  pend = jnp.where(known, 0, s.pend)
  pm_next = jnp.where(pending & (s.pend == 2) & ok & hit, s.pm + 1, s.pm)

  _, fhi, flo = _exponent(p, s.v, s.u)
  kku = jnp.maximum(s.kk, 1).astype(jnp.uint32)
  ok_j, j = _uniform_below(w1, kku)
  rho = fhi % kku
  tie_value = (j < rho) | ((j == rho) & (w0 < flo))
  flags = (known.astype(jnp.int32) | (((m_star % 2) == 0).astype(jnp.int32) << 1)
           | ((s.tie & ok_j).astype(jnp.int32) << 2)
           | (tie_value.astype(jnp.int32) << 3) | (pend << 4))
  return flags, pm_next


def _decide(p: ExpParams, s: _Lanes, w0: jax.Array, w1: jax.Array,
            rflags: jax.Array) -> jax.Array:
  """All of a step's decisions, packed into one int32 word per lane.

  Bits: 0-2 new phase, 3 draw U and sign from w1, 4 new tie, 5-6 new pend,
  7 pm <- bits 20-23, 8 pm <- resolved pm, 9 and 10 V += 1, 11 reset V,
  12 and 13 nint -= 1, 14 reset K, 15 and 16 K += 1.
  """
  whole, fhi, flo = _exponent(p, s.v, s.u)
  start = s.phase == _START
  phase = jnp.where(start, jnp.where(whole == 0, _EFRAC, _EINT), s.phase)
  nint0 = jnp.where(start, whole, s.nint)
  kk0 = jnp.where(start, 1, s.kk)
  running = phase != _DONE
  e1_phase = running & (phase <= _EINT)
  pending = e1_phase & (s.pend != 0)
  fresh = e1_phase & (s.pend == 0)
  is_prop = phase == _PROPOSE
  is_geo = phase == _GEO
  is_eint = phase == _EINT
  is_frac = phase == _EFRAC
  geo = is_prop | is_geo

  r0, k0, m0 = _bern_exp_minus_one(w0)
  r1, k1, m1 = _bern_exp_minus_one(w1)
  res_known = (rflags & 1) == 1
  res_val = (rflags & 2) == 2
  tie_known = (rflags & 4) == 4
  tie_val = (rflags & 8) == 8

  # First Bernoulli(e^-1) decision of the step.
  a_known = jnp.where(pending, res_known, fresh & (k0 == 0))
  a_val = jnp.where(pending, res_val, r0)
  a_amb = fresh & (k0 != 0)
  a_succ = a_known & a_val
  a_fail = a_known & ~a_val
  # Second decision: GEO / EINT lanes that were not pending and continue.
  v1 = s.v + (a_succ & geo).astype(jnp.int32)
  n1 = nint0 - (a_succ & is_eint).astype(jnp.int32)
  cont = a_succ & fresh & ((is_geo & (v1 <= p.v_max)) | (is_eint & (n1 > 0)))
  b_known = cont & (k1 == 0)
  b_amb = cont & (k1 != 0)
  b_succ = b_known & r1
  b_fail = b_known & ~r1
  pend = jnp.where(a_amb, k0, jnp.where(b_amb, k1, rflags >> 4))
  m_sel = jnp.where(a_amb, m0, m1)

  draw = fresh & is_prop
  u = jnp.where(draw, ((w1 >> _u32(32 - p.tau)) if p.tau else
                       jnp.zeros_like(w1)).astype(jnp.int32), s.u)
  neg = jnp.where(draw, (w1 & _u32(1)) == _u32(1), s.neg)
  v = v1 + (b_succ & geo).astype(jnp.int32)
  over = geo & (v > p.v_max)
  v_final = geo & (a_fail | b_fail)
  z = (jnp.minimum(v, p.v_max) << p.tau) + u
  minus_zero = v_final & neg & (z == 0)
  to_start = v_final & ~minus_zero
  nint = n1 - (b_succ & is_eint).astype(jnp.int32)
  eint_fail = is_eint & (a_fail | b_fail)
  eint_done = is_eint & ~(a_fail | b_fail) & (nint == 0)

  # EFRAC: up to two steps K, K + 1 of the Bernoulli(exp(-frac)) loop.
  plain = is_frac & ~s.tie
  kku = jnp.maximum(kk0, 1).astype(jnp.uint32)
  q1 = fhi // kku
  q2 = fhi // (kku + _u32(1))
  s1, t1 = w0 < q1, w0 == q1
  s2, t2 = w1 < q2, w1 == q2
  tied = is_frac & s.tie & tie_known
  f_succ1 = (plain & s1) | (tied & tie_val)
  f_stop1 = (plain & ~s1 & ~t1) | (tied & ~tie_val)
  go2 = plain & s1
  inc2 = go2 & s2
  f_stop2 = go2 & ~s2 & ~t2
  kk = kk0 + f_succ1.astype(jnp.int32) + inc2.astype(jnp.int32)
  tie = (plain & (t1 | (s1 & t2))) | (is_frac & s.tie & ~tie_known)
  stop = f_stop1 | f_stop2
  accept = stop & ((kk % 2) == 1)

  reject = over | minus_zero | eint_fail | (stop & ~accept)
  new_phase = phase
  new_phase = jnp.where(geo & (a_succ | b_succ), _GEO, new_phase)
  new_phase = jnp.where(to_start, _START, new_phase)
  new_phase = jnp.where(eint_done, _EFRAC, new_phase)
  new_phase = jnp.where(accept, _DONE, new_phase)
  new_phase = jnp.where(reject, _PROPOSE, new_phase)
  bits = [
      (draw, 3), (tie & ~reject, 4), (a_amb | b_amb, 7),
      (pending & ~a_amb & ~b_amb, 8), (a_succ & geo, 9), (b_succ & geo, 10),
      (reject, 11), (a_succ & is_eint, 12), (b_succ & is_eint, 13),
      (eint_done | reject, 14), (f_succ1, 15), (inc2, 16)]
  flags = new_phase | (jnp.where(reject, 0, pend) << 5) | (m_sel << 20)
  for b, i in bits:
    flags = flags | (b.astype(jnp.int32) << i)
  return flags


def _step(p: ExpParams, s: _Lanes, w0: jax.Array, w1: jax.Array) -> _Lanes:
  """Advances every running lane by one or two exact decisions.

  Phases: PROPOSE draws U and the sign (w1) and the first Bernoulli(e^-1) of
  V (w0); GEO continues V (two Bernoulli(e^-1) a step); START reads the
  exact exponent E of the final V and goes on as EINT or EFRAC; EINT runs
  floor(E) Bernoulli(e^-1) trials (two a step, stopping at the first
  failure); EFRAC runs the loop of Bernoulli(frac(E) / K), K = 1, 2, ...
  (two a step) and accepts iff it stops at an odd K. Each
  Bernoulli(frac / K) uses one word w: success if w < floor(fhi / K),
  failure if w > floor(fhi / K), and on equality (probability 2^-32) it is
  finished exactly by ``_resolve``.

  The decisions are computed once into a packed int32 (``_decide``) inside a
  ``lax.cond`` whose predicate is always true (K >= 1) but opaque to XLA: its
  output is materialized, so XLA does not fuse, and recompute, the decisions
  into every output array.
  """
  rflags, rpm = jax.lax.cond(
      jnp.any((s.pend != 0) | s.tie), lambda: _resolve(p, s, w0, w1),
      lambda: (jnp.zeros_like(s.pend), s.pm))
  flags = jax.lax.cond(s.kk[0] >= 1, lambda: _decide(p, s, w0, w1, rflags),
                       lambda: jnp.zeros_like(s.pend))

  def bit(i):
    return ((flags >> i) & 1) == 1

  def one(i):
    return (flags >> i) & 1

  start = s.phase == _START
  whole, _, _ = _exponent(p, s.v, s.u)
  draw = bit(3)
  return _Lanes(
      phase=flags & 7,
      u=jnp.where(draw, ((w1 >> _u32(32 - p.tau)) if p.tau else
                         jnp.zeros_like(w1)).astype(jnp.int32), s.u),
      neg=jnp.where(draw, (w1 & _u32(1)) == _u32(1), s.neg),
      v=jnp.where(bit(11), 0, s.v + one(9) + one(10)),
      nint=jnp.where(start, whole, s.nint) - one(12) - one(13),
      kk=jnp.where(bit(14), 1, jnp.where(start, 1, s.kk) + one(15) + one(16)),
      tie=bit(4),
      pend=(flags >> 5) & 3,
      pm=jnp.where(bit(7), (flags >> 20) & 15, jnp.where(bit(8), rpm, s.pm)))


def _num_lanes(n: int) -> int:
  """Work-queue width: about n / 32 lanes, between 1024 and 32768."""
  return min(n, max(1024, min(32768, n // 32)))


def _ranks(mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(exclusive prefix count of ``mask``, its total), via 32-bit popcounts."""
  w = mask.shape[0]
  bits = jnp.pad(mask, (0, (-w) % 32)).reshape(-1, 32).astype(jnp.uint32)
  lane = jnp.arange(32, dtype=jnp.uint32)
  word = jnp.sum(bits << lane, axis=1, dtype=jnp.uint32)  # distinct bits: OR
  count = jax.lax.population_count(word).astype(jnp.int32)
  before = jnp.cumsum(count) - count
  below = (_u32(1) << lane) - _u32(1)
  within = jax.lax.population_count(word[:, None] & below).astype(jnp.int32)
  return (before[:, None] + within).reshape(-1)[:w], jnp.sum(count)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _run_lanes(p: ExpParams, key: jax.Array, n: int) -> jax.Array:
  """Draws n independent samples with a work queue of ``_num_lanes(n)`` lanes.

  Sample i runs in some lane from start to finish; a lane that finishes
  writes its result to slot i and takes the next unstarted index. Every step
  draws fresh words for every lane, so each sample sees i.i.d. uniform words
  whatever the schedule: the output is n i.i.d. exact draws.
  """
  width = _num_lanes(n)

  def cond(carry):
    _, nxt, lanes, _, _ = carry
    return (nxt < n) | jnp.any(lanes.phase != _DONE)

  def body(carry):
    i, nxt, lanes, slots, out = carry
    w = jax.random.bits(jax.random.fold_in(key, i), (2, width), jnp.uint32)
    lanes = _step(p, lanes, w[0], w[1])
    done = lanes.phase == _DONE
    out = out.at[jnp.where(done & (slots >= 0), slots, n)].set(
        _lane_value(p, lanes), mode='drop')
    rank, total = _ranks(done)
    new = nxt + rank
    refill = done & (new < n)
    slots = jnp.where(done, jnp.where(refill, new, -1), slots)
    nxt = jnp.minimum(nxt + total, n)
    # A finished lane has tie = False and pend = 0; PROPOSE sets the rest.
    lanes = lanes._replace(phase=jnp.where(refill, _PROPOSE, lanes.phase),
                           v=jnp.where(refill, 0, lanes.v))
    return i + 1, nxt, lanes, slots, out

  carry = (jnp.zeros([], jnp.int32), jnp.asarray(width, jnp.int32),
           _fresh_lanes(width), jnp.arange(width, dtype=jnp.int32),
           jnp.zeros((n,), jnp.int32))
  return jax.lax.while_loop(cond, body, carry)[4]


def exact_sample(p: ExpParams, key: jax.Array,
                 shape: tuple[int, ...]) -> jax.Array:
  """int32 array of ``shape`` of i.i.d. exact draws of the sampler ``p``."""
  n = math.prod(shape)
  if n == 0:
    return jnp.zeros(shape, jnp.int32)
  return _run_lanes(p, _validate.key(key), n).reshape(shape)
