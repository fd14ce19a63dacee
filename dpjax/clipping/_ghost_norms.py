"""Ghost norms of Dense and conv layers, certified under float32 rounding.

For a layer applied at T positions of one example (inputs a_t, output
gradients g_t) the per-example gradient is ``G = sum_t a_t^T g_t``. Its
squared norm in the Gram form (Li et al. 2022, eq. 4) is
``sum_{t,s} (a_t . a_s)(g_t . g_s)``: large terms whose exact sum is small
(a_1 = a_2, g_2 = -g_1 + d) cancel, and float32 can return 0 for a gradient
of norm |a||d|, which ``min(1, C / norm)`` would then not clip. So each
multi-position form here returns a certified upper bound: the computed value
plus a bound on its rounding error, by the standard analysis of Higham,
"Accuracy and Stability of Numerical Algorithms" (2nd ed., 2002), ch. 3.

Notation: u = 2^-24 (float32, round to nearest), ``gamma(n) = n u / (1 -
n u)``; ``alpha_t = |a_t|``, ``beta_t = |g_t|`` (per head h); a dot product
of length n computed in ANY order satisfies ``|fl(x.y) - x.y| <= gamma(n)
|x|.|y|`` (Higham eq. 3.5 and the remark after it), and ``(1 + gamma(j))
(1 + gamma(k)) <= 1 + gamma(j + k)`` (Lemma 3.3). [DERIVED]

* Blocked contractions (``row_dots``, ``outer_sum``). A dot of length n
  summed in one contraction has depth n. Cut into m blocks of b ~ sqrt(n)
  terms, each one contraction (depth b, any order), the blocks added one
  after another behind an optimization barrier (m - 1 additions, no fusion
  into the contraction), every term has depth d = b + m - 1 ~ 2 sqrt(n):
  ``gamma(d)`` replaces ``gamma(n)`` below (23 for n = 128, 95 for 2048).
* Gram form, K inputs, N outputs, H heads. The computed ``aa_ts = a_t . a_s
  + e_ts`` and ``gg_ts = g_t . g_s + f_ts`` have ``|e_ts| <= gamma(d_K)
  alpha_t alpha_s`` and ``|f_ts| <= gamma(d_N) beta_t beta_s``, so ``|aa gg -
  (a_t . a_s)(g_t . g_s)| <= gamma(d_K) alpha_t alpha_s |gg_ts| + gamma(d_N)
  |aa_ts| beta_t beta_s + gamma(d_K) gamma(d_N) alpha_t alpha_s beta_t
  beta_s`` (an exact entry, e.g. a one-hot row's, has gamma 0).
  The products are rounded (u) and summed first over s (T terms) then, after
  an optimization barrier that keeps XLA from merging the two reductions,
  over (h, t) (H T terms): error at most ``gamma(T + H T) sum |aa_ts||gg_ts|``
  (Higham eq. 3.4 with the depth of each term). The sum of these bounds is
  the margin; it is computed from nonnegative terms with relative error far
  below 1/2, so twice the computed margin bounds the error, and
  ``||G||^2 <= n2 + 2 margin``. Where nothing cancels the margin is about
  gamma times ||G||^2; where a record cancels, it is what ||G||^2 may be.
* Direct form (``per = fl(sum_t a_t^T g_t)``, blocked over T: depth d_T):
  ``||per - G||_F <= gamma(d_T) sqrt(sum_h (sum_t alpha_t beta_t)^2)``
  (Cauchy-Schwarz on ``sum_t |a_tk||g_tn|``), times max|M| under a coordinate
  mask M; the bound is ``(||per|| + 2 gamma(d_T) S)^2``. Relative to ||G||
  (about sqrt(T) alpha beta where positions do not align) the margin is
  about gamma(d_T) sqrt(T): it grows as T, not as T^1.5 with depth T.
* One position (T = 1, ``||a||^2 ||g||^2``, or ``(a^2)^T M^2 (g^2)``) sums
  nonnegative terms: relative error only, nothing to cancel, no margin.

Every contraction here asks for ``precision=HIGHEST``: on GPUs XLA otherwise
may run float32 matmuls and convolutions in TF32 (10-bit mantissa), outside
the analysis. Convolutions are assumed evaluated as sums of products (direct
or GEMM algorithms, as XLA's CPU and GPU backends do at that precision), not
by FFT or Winograd transforms. What the certificate leaves out is the
relative rounding of a float32 norm itself (about u, as for the vmap path's
norms) and the rounding of the batch sum that book-keeping forms.

Example:
  >>> a = jnp.ones((2, 1, 3, 4))  # [B, H, T, K]: T = 3 positions
  >>> g = jnp.ones((2, 1, 3, 5))  # [B, H, T, N]
  >>> gram = factored_sq_norm(a, g, None, gram=True)
  >>> direct = factored_sq_norm(a, g, None, gram=False)
  >>> bool(jnp.all(gram >= 180.0)), bool(jnp.all(direct >= 180.0))
  (True, True)
  >>> bool(jnp.allclose(gram, 180.0, rtol=1e-5))  # margin ~ gamma ||G||^2
  True
"""

import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from dpjax.clipping import _ghost_plan

HIGHEST = lax.Precision.HIGHEST
UNIT_ROUNDOFF = 2.0 ** -24  # float32, round to nearest


def gamma(n: int) -> float:
  """Higham's gamma_n = n u / (1 - n u) for float32 (Lemma 3.1)."""
  nu = n * UNIT_ROUNDOFF
  if nu >= 0.25:
    raise ValueError(
        f'Expected a layer with fewer than {int(0.25 / UNIT_ROUNDOFF)} terms '
        f'per ghost-norm dot product (float32 error bound), got {n}.')
  return nu / (1.0 - nu)


def _row_norms(x) -> jax.Array:
  """|x_t| over the last axis, float32."""
  return jnp.sqrt(jnp.sum(jnp.square(x.astype(jnp.float32)), axis=-1))


def gram_bound(aa, gg, alpha, beta, gamma_a, gamma_g) -> jax.Array:
  """Certified sum_{h,t,s} aa gg per example (see module doc).

  Args:
    aa, gg: computed Gram matrices [B, H, T, T].
    alpha, beta: |a_t|, |g_t| [B, H, T].
    gamma_a, gamma_g: bounds on the relative error of ``aa`` and ``gg``
      (``gamma`` of their dot products' length), floats or [T, T] arrays
      (0 where an entry is exact, e.g. a one-hot row's).
  """
  _, h, t, _ = aa.shape
  rows = jnp.sum(aa * gg, axis=3)
  rows = lax.optimization_barrier(rows)  # two reductions: depth T + H T
  n2 = jnp.sum(rows, axis=(1, 2))
  g_s = gamma(t + h * t)
  alpha2 = alpha[..., :, None] * alpha[..., None, :]
  beta2 = beta[..., :, None] * beta[..., None, :]
  abs_aa, abs_gg = jnp.abs(aa), jnp.abs(gg)
  margin = jnp.sum(gamma_a * alpha2 * abs_gg + gamma_g * abs_aa * beta2
                   + g_s * abs_aa * abs_gg, axis=(1, 2, 3))
  s2 = jnp.sum(jnp.square(jnp.sum(alpha * beta, axis=2)), axis=1)
  return n2 + 2.0 * (margin + np.max(gamma_a) * np.max(gamma_g) * s2)


def direct_bound(n2, alpha, beta, steps: int, mask_max=1.0) -> jax.Array:
  """Certified ||G||^2 from ``n2 = ||M * per||^2``, per = the computed sum of
  outer products a_t^T g_t whose every entry passed through at most
  ``steps`` roundings (alpha, beta: [B, H, T] row norms)."""
  s = jnp.sqrt(jnp.sum(jnp.square(jnp.sum(alpha * beta, axis=2)), axis=1))
  return jnp.square(jnp.sqrt(n2) + 2.0 * gamma(steps) * mask_max * s)


def _blocks(n: int) -> tuple[int, int]:
  """(b, m): n terms as m blocks of b ~ sqrt(n), depth b + m - 1; b divides
  n where a divisor up to 2 sqrt(n) does (no padded copy)."""
  b = math.isqrt(n - 1) + 1 if n > 1 else 1
  b = next((d for d in range(b, 2 * b + 1) if n % d == 0), b)
  return b, -(-n // b)


def _blocked(x, y, axis: int, spec: str) -> tuple[jax.Array, int]:
  """``einsum(spec, x, y)`` contracting ``axis`` in blocks (see
  ``outer_sum``): (result in float32, its rounding depth)."""
  same = y is x
  x = x.astype(jnp.float32)
  y = x if same else y.astype(jnp.float32)
  n = x.shape[axis]
  b, m = _blocks(n)
  if b + m - 1 >= n:
    return jnp.einsum(spec, x, y, precision=HIGHEST), n
  if m * b > n:
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, m * b - n)  # zeros: exact
    x = jnp.pad(x, pad)
    y = x if same else jnp.pad(y, pad)

  def part(j):
    return jnp.einsum(spec, lax.dynamic_slice_in_dim(x, j * b, b, axis),
                      lax.dynamic_slice_in_dim(y, j * b, b, axis),
                      precision=HIGHEST)

  def add(j, acc):  # the barrier keeps XLA from fusing the sum into the dot
    return acc + lax.optimization_barrier(part(j))

  return lax.fori_loop(1, m, add, part(0)), b + m - 1


def outer_sum(big_a, big_g) -> tuple[jax.Array, int]:
  """(per [B, H, K, N] = sum_t a_t^T g_t in float32, its rounding depth).

  One contraction over all T positions has depth T (any order). Here T is
  cut into m blocks of b ~ sqrt(T) positions: each block is one contraction
  (depth b) and the blocks are added one after another (m - 1 additions,
  kept apart from the contractions by an optimization barrier), so every
  entry has depth b + m - 1 ~ 2 sqrt(T) (Higham Lemma 3.3), e.g. 95 rather
  than 2048 at T = 2048: the certified margin grows as T, not T^1.5.
  """
  return _blocked(big_a, big_g, 2, 'bhtk,bhtn->bhkn')


def row_dots(x, y) -> tuple[jax.Array, int]:
  """(x_t . y_s [..., T, S] in float32, its rounding depth ~ 2 sqrt(K)):
  the length-K dots in blocks, as ``outer_sum``."""
  return _blocked(x, y, x.ndim - 1, '...tk,...sk->...ts')


def factored_sq_norm(big_a, big_g, mask, gram: bool) -> jax.Array:
  """Certified ||M * sum_t a_t^T g_t||^2 per example ([B, H, T, K] a,
  [B, H, T, N] g, mask [H, K, N] or None)."""
  big_a = big_a.astype(jnp.float32)
  big_g = big_g.astype(jnp.float32)
  _, _, t, k = big_a.shape
  if t == 1:  # ||a||^2 ||g||^2, or (a^2)^T M^2 (g^2): nothing cancels
    a, g = big_a[:, :, 0], big_g[:, :, 0]
    if mask is None:
      return jnp.sum(jnp.einsum('bhk,bhk->bh', a, a, precision=HIGHEST)
                     * jnp.einsum('bhn,bhn->bh', g, g, precision=HIGHEST), -1)
    return jnp.einsum('bhk,hkn,bhn->b', jnp.square(a), jnp.square(mask),
                      jnp.square(g), precision=HIGHEST)
  alpha, beta = _row_norms(big_a), _row_norms(big_g)
  if gram and mask is None:  # sum_{t,s} (a_t . a_s)(g_t . g_s)
    (aa, depth_a), (gg, depth_g) = (row_dots(big_a, big_a),
                                    row_dots(big_g, big_g))
    return gram_bound(aa, gg, alpha, beta, gamma(depth_a), gamma(depth_g))
  per, steps = outer_sum(big_a, big_g)
  mask_max = 1.0
  if mask is not None:
    per = per * mask
    mask_max = jnp.max(jnp.abs(mask))
  return direct_bound(jnp.sum(jnp.square(per), axis=(1, 2, 3)), alpha, beta,
                      steps, mask_max)


def _patch_slices(x, filter_shape, params) -> list[jax.Array]:
  """The input slices that meet each kernel tap of a conv, for ONE input.

  Args:
    x: one conv input in the conv's lhs layout.
    filter_shape: kernel spatial sizes in the order of ``rhs_spec[2:]``.
    params: the conv equation's parameters.

  Returns:
    One [T, C] array per kernel offset (row-major over ``filter_shape``); T
    runs over (batch, output positions). Stacked on a last axis and flattened
    C-major they are ``lax.conv_general_dilated_patches`` (the im2col
    matrix), which this never builds.
  """
  lhs_spec = params['dimension_numbers'].lhs_spec
  strides, rhs_dil = params['window_strides'], params['rhs_dilation']
  x = jnp.transpose(x, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
  pad = [(lo, hi, d - 1) for (lo, hi), d in zip(params['padding'],
                                                params['lhs_dilation'])]
  x = lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0), *pad, (0, 0, 0)])
  outs = [(x.shape[1 + i] - (k - 1) * d - 1) // s + 1
          for i, (k, d, s) in enumerate(zip(filter_shape, rhs_dil, strides))]
  slices = []
  for offset in np.ndindex(*filter_shape):
    start = [0] + [o * d for o, d in zip(offset, rhs_dil)] + [0]
    limit = ([x.shape[0]] + [b + (n - 1) * s + 1 for b, n, s in
                             zip(start[1:], outs, strides)] + [x.shape[-1]])
    piece = lax.slice(x, start, limit, [1, *strides, 1])
    slices.append(piece.reshape(-1, x.shape[-1]).astype(jnp.float32))
  return slices


def _conv_factors(tap: _ghost_plan.Tap, a, g):
  """(patch slices [B, T, C] per offset, |p_t| [B, 1, T], g [B, T, N] f32,
  |g_t| [B, 1, T]) of a conv tap."""
  params = tap.eqn.params
  _, rhs_spec, out_spec = params['dimension_numbers']
  kernel = tap.eqn.invars[tap.operand].aval.shape
  filter_shape = tuple(kernel[d] for d in rhs_spec[2:])
  slices = jax.vmap(lambda x: _patch_slices(x, filter_shape, params))(a)
  alpha = jnp.sqrt(sum(jnp.sum(jnp.square(p), axis=-1) for p in slices))
  perm = [0] + [1 + d for d in (out_spec[0], *out_spec[2:], out_spec[1])]
  big_g = jnp.transpose(g, perm).astype(jnp.float32)
  big_g = big_g.reshape(g.shape[0], -1, big_g.shape[-1])
  return slices, alpha[:, None], big_g, _row_norms(big_g)[:, None]


def conv_gram_sq_norm(tap: _ghost_plan.Tap, a, g) -> jax.Array:
  """Certified sum_{t,s} (p_t . p_s)(g_t . g_s), p_t the patch at output t.

  The patch Gram matrix is accumulated over kernel offsets, ``sum_o X_o
  X_o^T`` (the T x K patches are never materialized): one dot of length K =
  C_in prod(kernel) per entry, summed in that order.
  """
  slices, alpha, big_g, beta = _conv_factors(tap, a, g)
  aa = None
  for piece in slices:
    term = jnp.einsum('btc,bsc->bts', piece, piece, precision=HIGHEST)
    aa = term if aa is None else aa + term
  gg = jnp.einsum('btn,bsn->bts', big_g, big_g, precision=HIGHEST)
  if aa.shape[1] == 1:  # one output position: nothing cancels
    return (aa * gg)[:, 0, 0]
  k = len(slices) * slices[0].shape[-1]
  return gram_bound(aa[:, None], gg[:, None], alpha, beta, gamma(k),
                    gamma(big_g.shape[-1]))


def _patch_norms(tap: _ghost_plan.Tap, a) -> jax.Array:
  """|p_t| [B, 1, T] of a conv tap without its patches: the layer's conv of
  the squared input with an all-ones filter of one output feature (the
  same windows, strides, padding and dilation), at ``precision=HIGHEST``."""
  eqn = tap.eqn
  _, rhs_spec, out_spec = eqn.params['dimension_numbers']
  shape = list(eqn.invars[tap.operand].aval.shape)
  shape[rhs_spec[0]] = 1
  ones = jnp.ones(shape, jnp.float32)

  def one(x):
    x = jnp.square(x.astype(jnp.float32))
    return _ghost_plan.bind(eqn, [x, ones], precision=(HIGHEST, HIGHEST),
                            preferred_element_type=None)[0]

  sq = jax.vmap(one)(a)
  perm = [0] + [1 + d for d in (out_spec[0], *out_spec[2:], out_spec[1])]
  sq = jnp.transpose(sq, perm).reshape(a.shape[0], 1, -1)
  return jnp.sqrt(sq)


def conv_direct_bound(tap: _ghost_plan.Tap, a, g, n2, mask_max=1.0):
  """Certified ||G||^2 from ``n2``, the squared norm of a computed
  per-example filter gradient (a length-T sum per entry). The patch norms
  come from ``_patch_norms``: the im2col slices of ``_conv_factors`` would
  all be alive at once for a large kernel (64 of them for an 8 x 8 one)."""
  alpha = _patch_norms(tap, a)
  _, out_spec = tap.eqn.params['dimension_numbers'][1:]
  perm = [0] + [1 + d for d in (out_spec[0], *out_spec[2:], out_spec[1])]
  big_g = jnp.transpose(g, perm).astype(jnp.float32)
  beta = _row_norms(big_g.reshape(g.shape[0], -1, big_g.shape[-1]))[:, None]
  return direct_bound(n2, alpha, beta, alpha.shape[-1], mask_max)
