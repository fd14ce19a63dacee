"""lm_finetune's numbers (``_run.run``): losses are mean next-byte
cross-entropies in nats on the private test split; perplexity is their
exponential."""

import dataclasses

from experiments.common import results


@dataclasses.dataclass(frozen=True, kw_only=True)
class Corpus(results.Record):
  digest: str  # SHA-256 of every window used
  seq_len: int  # bytes per window the model reads
  windows: dict[str, int]  # per part: public, train, val, test


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run(results.Record):
  """One (method, epsilon)'s runs, per seed."""
  test_loss: list[float]
  val_loss: list[float]
  noise_multiplier: float  # 0 for the non-private twin
  epsilon: float | None  # read from the run's state; None: non-private


@dataclasses.dataclass(frozen=True, kw_only=True)
class Results(results.Results):
  corpus: Corpus
  steps: int  # DP-Adam steps of every fine-tuning run
  sampling_rate: float  # Poisson sampling rate q
  pretrained_test_loss: float  # the public model before fine-tuning
  pretrained_public_loss: float  # on the public windows it was trained on
  runs: dict[str, dict[str, Run]]  # per method, per eps (str) or 'inf'
  dimensions: dict[str, int]  # noised numbers per update: full, lora
