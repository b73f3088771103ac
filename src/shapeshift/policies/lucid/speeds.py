"""How fast a Lucid pair runs in simulation: the artifact's "little influence" rule.

The authors' simulator (S-Lab-System-Group/Lucid, ``simulation/updater.py``,
``ColocateUpdater.check_outside_job``) runs *both* jobs of a pair at full speed (rate 1)
when *either* job's model is NeuMF, ResNet50, BERT or Transformer; every other pair runs
at its measured speeds (``data/colocate_info.csv``). It is decided when the pair forms:
``policy/lucid.py`` ``Lucid.colocate_update`` asks ``ColocateUpdater.query_info`` for
the two rates and sets them on both jobs, and ``speed_recover`` sets rate 1 again on the
one left when its partner ends. Its comment ("Some Jobs are not recorded inside
colocate_df"; "Little Influence") gives the reason: ResNet50, BERT and Transformer have
no measured pairs in its table, so it assumes them harmless. NeuMF does have measured
pairs there and is run at full speed all the same. Sharing scores are untouched by the
rule: the three large models stay Jumbo in its labels.

In Shapeshift the engine's interference model sets every shared job's speed
(``SimulatedExecutor``), so Lucid hands the engine the run's model with this rule on top
(``AdaptsInterference``). A pair's speed depends only on its two jobs, so setting it at
every change of partners (our engine) and once when the pair forms (the artifact) give
the same speeds. ``full_speed_pair_models=()`` (none) slows every pair by the run's
model. The system tuner's replays (``tuner.py``) run the simulator's default speeds,
without the rule.

**A job's model in the artifact's names** (``artifact_model``) is the profiled model its
sharing profile comes from (``shapeshift.perf.colocation.profile_of``), which are the
artifact's own model names (``PROFILED``):

* a catalog model through ``PROFILE_SOURCE``: ``ncf`` and ``recommendation`` are NeuMF;
  ``resnet50``, ``resnet101``, ``imagenet``, ``inception3`` and ``yolov3`` are ResNet50;
  ``transformer`` is Transformer; ``bert-base`` is BERT;
* a job named by an artifact model is that model (``NeuMF``, ``ResNet50``,
  ``Transformer``), except ``BERT``, whose lower-case name is the whole-GPU ``bert``;
* a job without a catalogued model (every Philly job) is the model it draws by a hash of
  its id and the seed, the draw that gives its sharing profile and that
  ``scripts/lucid_artifact_input.py`` gives the artifact for the same job;
* the large transformers sized to a whole A800 (``bert``, ``roberta``, ``gpt2``, ...)
  have no artifact model and never fit beside another job.
"""

from __future__ import annotations

from dataclasses import dataclass

from shapeshift.model import JobSpec
from shapeshift.perf.colocation import PROFILED, InterferenceModel, profile_of

#: ``updater.check_outside_job``'s models, in its order.
ARTIFACT_FULL_SPEED = ("NeuMF", "ResNet50", "BERT", "Transformer")


def artifact_model(job: JobSpec, seed: int = 0) -> str:
    """The artifact's name for ``job``'s model (module docstring); "" when it has none."""
    name = profile_of(job, seed).profiled_as
    return name if name in PROFILED else ""


def runs_full_speed(job: JobSpec, partner: JobSpec, models: frozenset[str], seed: int = 0) -> bool:
    """Whether the pair runs at full speed for both jobs: either job's artifact model is
    in ``models``."""
    return artifact_model(job, seed) in models or artifact_model(partner, seed) in models


@dataclass(frozen=True)
class FullSpeedPairs:
    """``inner``'s pair speeds, except a pair that ``runs_full_speed`` under ``models``."""

    inner: InterferenceModel
    models: frozenset[str]
    seed: int = 0

    def pair_speed(self, job: JobSpec, partner: JobSpec) -> float:
        return 1.0 if runs_full_speed(job, partner, self.models, self.seed) else self.inner.pair_speed(job, partner)
