"""Private fine-tuning of a byte-level decoder language model.

A GPT-style decoder with tied input/output embeddings (``_model``) is
pretrained without privacy on the Python standard library's modules and
fine-tuned with DP-Adam on its test suite (``_corpus``: a disjoint, differently
styled private domain), full and LoRA (Hu et al. 2022), each at several
epsilons beside its non-private twin. The claims are those of Li et al.
2022 and Yu et al. 2022 (private fine-tuning of a public model comes close
to non-private; low-rank adapters match full fine-tuning). Claims:
``_claims``.
"""

from experiments.common import runner
from experiments.lm_finetune._claims import claims
from experiments.lm_finetune._config import Config
from experiments.lm_finetune._config import DESCRIPTION
from experiments.lm_finetune._config import NAME
from experiments.lm_finetune._report import report
from experiments.lm_finetune._results import Results
from experiments.lm_finetune._run import run

EXPERIMENT = runner.Experiment(NAME, DESCRIPTION, Config, Results, run, claims,
                               report)
