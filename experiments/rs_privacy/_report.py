"""rs_privacy's report body: the setting, the test and tuning tables."""

from typing import Any

from experiments.common import report as report_lib

COLUMNS = [('target_epsilon', 'target eps'), ('method', 'method'),
           ('rate', 'r*'), ('noise_multiplier', 'sigma'),
           ('epsilon_rdp', 'eps (RDP)'), ('epsilon_pld', 'eps (PLD)'),
           ('delta', 'delta'), ('test_accuracy_mean', 'test acc'),
           ('test_accuracy_sem', 'SEM'), ('seeds', 'seeds')]
TUNING_COLUMNS = [('target_epsilon', 'target eps'), ('rate', 'r*'),
                  ('test_accuracy', 'validation acc')]


def report(results: dict[str, Any], out_dir: str) -> str:
  del out_dir
  cfg = results['config']
  return '\n'.join([
      report_lib.dataset_line(results['dataset']), '',
      f"Model {results['model']}; {results['n_train']} training examples "
      f"({results['n_validation']} more held out for tuning r*), "
      f"{results['steps']} steps ({cfg['epochs']} epochs, q = "
      f"{results['sampling_rate']:.4f}), C = {cfg['l2_norm_clip']}, lr "
      f"{cfg['learning_rate']}, momentum {cfg['momentum']}.", '',
      report_lib.markdown_table(results['summary'], COLUMNS), '',
      'Validation accuracy of the tuning runs (seed '
      f"{cfg['seed']}):", '',
      report_lib.markdown_table(results['tuning'], TUNING_COLUMNS)])
