"""Private non-parametric learners (Huang thesis Table 5.3 and Fig. 5.1).

Methods on each dataset, paired by seed (same split for every method):
NoisyReg (label-DP only: features public), the fully private histogram,
DP-kNN (Laplace(2N/eps)) and random decision trees from
``dpjax.nonparametric``; non-private histogram, scikit-learn kNN and random
forest; diffprivlib's GaussianNB, LogisticRegression and
RandomForestClassifier at the same epsilon (imported lazily; recorded as
unavailable if the import fails).

Public bounds: the features are standardized with train statistics by the
data harness; the bounds of each feature are its minimum and maximum over
the whole dataset (train and test), treated as public as the thesis does
(it scales every set to [0, 1]^d). This is a convention of the experiment,
not a private computation; the report says so.

Histograms run on a JL projection to m = min(d, 4) dimensions with b = 4
bins per axis (fixed a priori, no validation split: choosing b on held-out
private data would cost budget the thesis does not account for).

Presets: ``_config.Config``. Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.nonparametric._claims import claims
from experiments.nonparametric._config import Config
from experiments.nonparametric._config import DESCRIPTION
from experiments.nonparametric._config import NAME
from experiments.nonparametric._report import report
from experiments.nonparametric._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, run, claims, report)
