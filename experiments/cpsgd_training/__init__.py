"""Distributed DP SGD with cpSGD (Agarwal et al., NeurIPS 2018, Fig. 2 analogue).

The training set is split at random into ``num_clients`` shards (one client
per shard). Every round, ``clients_per_round`` clients (default: all of them)
compute the gradient of the mean cross-entropy over their shard at the current
model, flatten it (``jax.flatten_util.ravel_pytree``) and the server gets the
round's aggregate from a distributed mean protocol, then takes an SGD step with
heavy-ball momentum (w <- w - lr v, v <- mu v + g_hat): the shared federated
loop of ``experiments.common.federated``, which records each protocol's
per-round event in a ledger. Protocols:

* cpSGD, ``dpjax.distributed.cpsgd_protocol`` (its mean is
  ``distributed_mean``): clip to D, randomized Hadamard rotation (padded to
  d'), k-level stochastic quantization, Bin(m, 1/2) noise, exact integer
  sum, decode. log2(k + m) bits per coordinate. Sweep k x m with rotation
  on, plus ``unrotated`` (k, m) pairs without it.
* Gaussian baseline, ``gaussian_distributed_mean_protocol``: clip to D, each
  client adds N(0, sigma_c^2), 32-bit floats. sigma is calibrated so that
  ONE round's tight epsilon (Gaussian mechanism on the sum, L2 sensitivity
  2 D under replace-one, exact: ``accounting.gaussian_stddev``) equals the
  Theorem 1 epsilon of each cpSGD configuration, at the same per-round
  delta; its total is the exact T-fold composition
  (``accounting.gaussian_epsilon``).
* Non-private: the plain mean of the unclipped gradients
  (``plain_mean_protocol``, 32 bits), and the clipped mean without noise
  (the Gaussian protocol at stddev 0; shows what clipping alone costs).

Privacy unit: one client (its whole shard), replace-one, the server sees only
the sum (secure aggregation). ``delta`` is the target delta of the WHOLE run;
each round is accounted at delta_round = delta / (2 rounds), so the ledger's
T-fold PLD composition at ``delta`` has the other half as slack. With
``clients_per_round < num_clients`` the selected subset is a random fixed-size
subset, but no privacy amplification by subsampling is claimed: every round is
charged its full Theorem 1 epsilon.

Presets (``_config.Config``): quick: 100 clients (all per round), 60
rounds, k in {2, 4, 16} x m in {32, 128, 512} with rotation, (16, 128)
without, 5 seeds. Full: 200 rounds, m up to 2048, 10 seeds. All seeds of a
protocol train at once (the federated loop's jitted vmap), and every cpSGD
configuration shares one compiled trainer (a ``lax.switch`` on the
configuration's index). Model: multinomial logistic
regression on the flattened 8x8 digits (650 parameters, d' = 1024). D = 0.25,
lr 0.5 and momentum 0.9 were picked once, before any cpSGD run, from a 3 x 3 x
3 grid (D in {0.25, 0.5, 1}, lr in {0.5, 1, 2}, momentum in {0, 0.5, 0.9}) by
the validation accuracy of a Gaussian run with noise multiplier 4 on the sum
(60 rounds, seed 0, 287 training examples held out as validation), never on the
test set.

Unlike the paper (one epoch over 25M one-example clients, so each client is
used once and the per-round epsilon is the total), every client here takes
part in every round, so the rounds compose.

Claims (``_claims``; three claim families, paired by seed on the final
test accuracy), all fixed from the per-round epsilons before any training:
cpSGD at the smallest per-round epsilon within 0.05 of its matched Gaussian
(non-inferiority); the same for each other configuration (Bonferroni over
them); and, for each pair of rotated configurations with per-round epsilons
within 1.25x and different bits, that more bits give the higher accuracy
(Bonferroni over the pairs). The accounting's deterministic
facts (the matched Gaussian round has the cpSGD round's epsilon; it composes
to less) are exact checks, not claims.
"""

from experiments.common import runner
from experiments.cpsgd_training._claims import claims
from experiments.cpsgd_training._config import Config
from experiments.cpsgd_training._config import DESCRIPTION
from experiments.cpsgd_training._config import NAME
from experiments.cpsgd_training._report import report
from experiments.cpsgd_training._results import Results
from experiments.cpsgd_training._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
