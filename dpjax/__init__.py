"""dpjax: differentially private and communication-efficient learning in JAX.

Mechanisms are optax ``GradientTransformation`` factories (``dpjax.transforms``)
chained like any optimizer; each privatizing one has a companion that builds
its ``DpEvent`` (``dpjax.accounting``) from the same hyperparameters, and a
``PrivacyLedger`` composes what ran. Families live in subpackages:
``transforms``, ``clipping``, ``compression``, ``noise``, ``recovery``,
``sampling``, ``distributed``, ``nonparametric``, ``finetune``,
``accounting``, ``audit``.
This namespace holds what people chain, plus the subpackages.

Glossary (one name per role, everywhere):

* ``l2_norm_clip``: the L2 clip bound C of one example's contribution.
* ``linf_clip``: a per-coordinate clip bound (the paper's xi or X_max).
* ``noise_multiplier``: Gaussian noise stddev divided by the L2 sensitivity.
* ``stddev``: an absolute Gaussian standard deviation.
* ``scale``: a Laplace (or discrete Laplace) scale b.
* ``sigma``: the scale of an exact discrete Gaussian.
* ``trials``, ``p``: Binomial parameters.
* ``epsilon``, ``delta``: privacy parameters; ``key``: a required PRNG key.
* ``num_clients``, ``num_agents``: sizes of a leading client / agent axis.
* ``dimension``: the length d of a flattened vector (not ``dim``).
* ``bits``: a communication cost in bits (``*_bits`` functions count them).
* ``dp_``: the prefix of the private version of a named algorithm.
* Planning: every Gaussian mechanism is
  ``accounting.gaussian_event(noise_multiplier, *, sampling_rate=1,
  steps=1)`` and every epsilon-DP release ``accounting.pure_dp_event(epsilon,
  *, steps=1)``, whatever the argument convention of the mechanism;
  ``<mechanism>_event(..., *, steps=1)`` exists only for a mechanism whose
  accounting differs (``laplace_event``, ``discrete_gaussian_event``,
  ``cpsgd_event``, ``distributed_dp_event``, ...). One calibrator,
  ``accounting.calibrate(make_event, target_epsilon, delta, *, steps)``
  (an integer ``start`` searches integers, e.g. trials).
* ``dpjax.accounting.step_event(opt_state, sampler)``: the event of a step,
  read from the optimizer state that ran.

Example:
  >>> sampler = dpjax.PoissonSampler(320, 0.1)  # batches of q N = 32
  >>> tx = dpjax.dpsgd(learning_rate=0.1, l2_norm_clip=1.0,
  ...                  noise_multiplier=1.1, sampler=sampler,
  ...                  key=jax.random.key(0))
  >>> per_example = jnp.ones((4, 3))   # four examples, three parameters
  >>> updates, _ = tx.update(per_example, tx.init(jnp.zeros(3)), jnp.zeros(3),
  ...                        mask=jnp.ones(4, bool))  # False on padded rows
  >>> updates.shape
  (3,)
"""

from dpjax import accounting
from dpjax import audit
from dpjax import clipping
from dpjax import compression
from dpjax import correlated_noise
from dpjax import distributed
from dpjax import finetune
from dpjax import noise
from dpjax import nonparametric
from dpjax import recovery
from dpjax import sampling
from dpjax import transforms
from dpjax.accounting import PrivacyLedger
from dpjax.clipping import clipped_grad_sum
from dpjax.clipping import per_example_grads
from dpjax.sampling import PoissonSampler
from dpjax.transforms import adaptive_dpsgd
from dpjax.transforms import add_gaussian_noise
from dpjax.transforms import add_laplace_noise
from dpjax.transforms import bandmf
from dpjax.transforms import clip_per_example
from dpjax.transforms import dpsgd
from dpjax.transforms import normalize
from dpjax.transforms import rs_dpsgd

__version__ = '0.2.0'

__all__ = [
    'accounting',
    'adaptive_dpsgd',
    'add_gaussian_noise',
    'add_laplace_noise',
    'audit',
    'bandmf',
    'clip_per_example',
    'clipped_grad_sum',
    'clipping',
    'compression',
    'correlated_noise',
    'distributed',
    'dpsgd',
    'finetune',
    'noise',
    'nonparametric',
    'normalize',
    'per_example_grads',
    'PoissonSampler',
    'PrivacyLedger',
    'recovery',
    'rs_dpsgd',
    'sampling',
    'transforms',
]
