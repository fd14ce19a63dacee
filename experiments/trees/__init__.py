"""Private tree ensembles (Huang thesis ch. 8, Tables 8.1-8.2, Fig. 8.6).

Table 8.1: supervised, eps = 2: SPE (``dpjax.nonparametric.spe``, 10 trees
of depth min(d, 10)) against RDT (``random_decision_trees``),
diffprivlib's RandomForestClassifier (10 trees) and DecisionTreeClassifier at
the same eps, scikit-learn's RandomForestClassifier (100 trees, not
private), and ceiling rows (SPE at eps = 1e4, RDT with exact counts).
Table 8.2 (not on iris and wine, as the thesis): 20% of the training set
labelled, 80% unlabelled: SSPE-1 (features and labels private), SSPE-2 as
written, SSPE-2 on shallow trees (sound), SSPE-2 with every tree counting
every label (UNSOUND: N x eps, labelled so), PTE (labels private, features
public), SPE on the labelled 20% alone, at eps and (SSPE-1, SPE) at a small
eps. Fig. 8.2: geometric vs uniform per-depth split budgets, by the private
medians' distance to the true ones (``_median``). Data: 90% train / 10% test
(the thesis's split), standardized by the loader; SynKd from
make_classification with its default 2 informative features (the thesis
names the generator only); the public bounds are each feature's range over
the whole dataset (train and test), treated as public as the thesis does.
Mean and std over seeds, a two-sided Mann-Whitney U test at 95% (SPE against
each private competitor, as the thesis), and the project's paired verdicts
with their minimal detectable effects.

Presets: ``_config.Config``. Claims: ``_claims``.
"""

from experiments.common import runner
from experiments.trees._claims import claims
from experiments.trees._config import Config
from experiments.trees._config import DESCRIPTION
from experiments.trees._config import NAME
from experiments.trees._report import report
from experiments.trees._results import Results
from experiments.trees._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
