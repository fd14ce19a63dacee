"""Private non-parametric learners (Huang thesis Table 5.3 and Fig. 5.1).

Methods on each dataset, paired by seed (the same splits for every method):
NoisyReg (label-DP only: features public), the fully private histogram,
DP-kNN (Laplace(2N/eps)) and random decision trees from
``dpjax.nonparametric``; diffprivlib's GaussianNB, LogisticRegression and
RandomForestClassifier at the same epsilon (imported lazily; recorded as
unavailable if the import fails); and a non-private ceiling per method (the
same estimator and settings without noise).

Public bounds: the features are standardized with train statistics by the
data harness; the bounds of each feature are its minimum and maximum over
the whole dataset (train and test), treated as public as the thesis does
(it scales every set to [0, 1]^d). This is a convention of the experiment,
not a private computation; the report says so.

Bins follow the thesis's rule b = ceil(n^(1/(m+2))) (Thm. 4.12, 5.7), fixed
a priori from the public n: choosing b on held-out private data would cost
budget the thesis does not account for. NoisyReg runs unprojected (it stores
occupied cells only); the dense private histogram runs on a public JL
projection with public bounds from the projection's row norms
(``_run.project``). Each seed averages repeated splits until it has scored
``min_test`` test points, so small sets (iris: 15 per split) are not decided
on a handful of points.

Presets: ``_config.Config``. Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.nonparametric._claims import claims
from experiments.nonparametric._config import Config
from experiments.nonparametric._config import DESCRIPTION
from experiments.nonparametric._config import NAME
from experiments.nonparametric._report import report
from experiments.nonparametric._results import Results
from experiments.nonparametric._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
