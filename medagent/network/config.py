"""The network analysis' settings (its own module, so ``conventions`` can word them without importing the
analysis that uses them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from medagent.network.sensitivity import SensitivityConfig


@dataclass
class NetworkAnalysisConfig:
    """Every knob of the analysis; the defaults are the conventions reported with the results."""

    alpha: float = 0.01
    # The number of tests N_t of Bonferroni and BH (svn.N_TESTS): all_pairs (|F|*|D|, Tumminello's),
    # cooccurring (N_fd >= 1) or tarone (testable pairs); the sensitivity table shows all three.
    n_tests: str = "all_pairs"
    # Which validated links form G_B: "bh" (Benjamini–Hochberg) or "bonferroni"; both are reported.
    links: str = "bh"
    modularity_restarts: int = 50
    # Significance of the binary Q_B (METHODS.md §1.2 pitfall 5): null networks of this model, each optimised
    # like G_B (same restarts and seed); 0 skips it. One executor task per batch.
    modularity_null_samples: int = 99
    modularity_null_model: str = "curveball"
    modularity_null_batch_size: int = 10
    null_models: list[str] = field(default_factory=lambda: ["r00", "r1", "curveball"])
    null_samples: int = 999
    null_batch_size: int = 250
    curveball_burnin: int = 10_000
    curveball_thin: int = 100
    nodf_sort: bool = True
    kl_prior: str = "joint"
    # Label permutations of the KL null (permutation.kl_permutation_null); 0 skips it.
    kl_null_samples: int = 999
    # Shuffled-position nulls of the two-phase split (flow.phase_null); 0 skips it.
    phase_null_samples: int = 99
    # Headline flow convention; Markov fits and CV accuracy are computed under both (issue 16: collapse,
    # whose order-0 accuracy is the share of the commonest category, matches the paper's 23.8%).
    self_loops: str = "collapse"
    max_order: int = 3
    cv_folds: int | None = 10
    position: str = "all"
    seed: int = 0
    # None: the packaged conf/interview/priorities.yaml.
    priorities: str | None = None
    sensitivity: SensitivityConfig = field(default_factory=SensitivityConfig)
    # Every printed empirical p is (1 + #null >= obs) / (n + 1): with n < 99 none can fall below 0.01, with 19
    # none below 0.05. Each null count must be 0 (skipped, no p) or at least this; lower it only for tests.
    min_null_samples: int = 99

    def __post_init__(self) -> None:
        counts = {
            "null_samples": self.null_samples,
            "modularity_null_samples": self.modularity_null_samples,
            "kl_null_samples": self.kl_null_samples,
            "phase_null_samples": self.phase_null_samples,
            "sensitivity.null_samples": self.sensitivity.null_samples,
        }
        few = {k: n for k, n in counts.items() if 0 < n < self.min_null_samples}
        if few:
            raise ValueError(
                f"{few}: a printed p-value needs >= {self.min_null_samples} null samples "
                "(or 0 to skip the null and its p)"
            )
