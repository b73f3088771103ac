"""Readers of Kueue and KAI-Scheduler YAML: fields, defaults, and one located error per bad document."""

from __future__ import annotations

import pytest

from shapeshift.errors import InputError
from shapeshift.k8s.documents import parse_documents
from shapeshift.k8s.kai_config import UNLIMITED, kai_from_documents
from shapeshift.k8s.kueue_config import kueue_from_documents

KUEUE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: v100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team-ab}
spec: {parentName: org, fairSharing: {weight: "2"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  namespaceSelector: {}
  cohortName: team-ab
  queueingStrategy: StrictFIFO
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerPriority
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: 1}
      - {name: memory, nominalQuota: 36Gi}
      - {name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 2}
    - name: v100
      resources:
      - {name: cpu, nominalQuota: 500m}
      - {name: memory, nominalQuota: 1G}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  cohort: team-ab
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: team-a-cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"""


def test_kueue_fields_and_defaults():
    config = kueue_from_documents(parse_documents(KUEUE, "q.yaml"))
    a = config.cluster_queues["team-a-cq"]
    assert a.cohort == "team-ab" and a.queueing_strategy == "StrictFIFO"
    assert a.preemption.reclaim_within_cohort == "Any" and a.preemption.borrow_within_cohort == "LowerPriority"
    assert a.preemption.max_priority_threshold == 100 and a.preemption.within_cluster_queue == "LowerPriority"
    # deprecated "Preempt" reads as MayStopSearch (cluster_queue.md, FlavorFungibility)
    assert (
        a.flavor_fungibility.when_can_borrow == "TryNextFlavor"
        and a.flavor_fungibility.when_can_preempt == "MayStopSearch"
    )
    gpu = a.resource_groups[0].flavors[0].resources[2]
    assert (gpu.nominal, gpu.borrowing_limit, gpu.lending_limit) == (8, None, 2)
    assert a.resource_groups[0].flavors[0].resources[1].nominal == 36 * 2**30
    assert a.resource_groups[0].flavors[1].resources[0].nominal == pytest.approx(0.5)
    assert a.namespace_selector is not None and a.namespace_selector.matches({"any": "x"})
    b = config.cluster_queues["team-b-cq"]  # v1beta1 spelling; every default
    assert b.cohort == "team-ab" and b.queueing_strategy == "BestEffortFIFO" and b.fair_weight == 1.0
    assert b.preemption.within_cluster_queue == b.preemption.reclaim_within_cohort == "Never"
    assert (b.flavor_fungibility.when_can_borrow, b.flavor_fungibility.when_can_preempt) == (
        "MayStopSearch",
        "TryNextFlavor",
    )
    assert b.namespace_selector is None  # unset selector admits no namespace (clusterqueue_types.go)
    assert config.cohorts["team-ab"].parent == "org" and config.cohorts["team-ab"].fair_weight == 2.0
    assert config.local_queues[("team-a", "lq")].cluster_queue == "team-a-cq"
    assert config.priority_classes["high"].value == 1000
    assert config.flavors["a100"].node_labels == (("gpu", "a100"),)


def _error(text: str, reader=kueue_from_documents) -> InputError:
    with pytest.raises(InputError) as info:
        reader(parse_documents(text, "bad.yaml"))
    return info.value


def test_unknown_kind_names_file_document_and_field():
    err = _error(KUEUE + "---\nkind: Deployment\nmetadata: {name: web}\n")
    assert err.path == "bad.yaml" and err.field == "kind"
    assert "document 9 (Deployment 'web')" in str(err) and "unknown kind" in str(err)


def test_quota_over_undefined_flavor():
    text = KUEUE.replace("- name: v100\n", "- name: h100\n")
    err = _error(text)
    assert err.field == "spec.resourceGroups[0].flavors[1].name" and "document 5" in str(err) and "'h100'" in str(err)


def test_cohort_cycle():
    text = KUEUE.replace("metadata: {name: org}\n", "metadata: {name: org}\nspec: {parentName: team-ab}\n")
    err = _error(text)
    assert "cycle" in str(err) and err.field == "spec.parentName"
    assert "org -> team-ab -> org" in str(err)


def test_local_queue_naming_no_cluster_queue():
    err = _error(KUEUE.replace("clusterQueue: team-a-cq", "clusterQueue: team-z-cq"))
    assert err.field == "spec.clusterQueue" and "document 7" in str(err) and "team-z-cq" in str(err)
    assert err.line is not None and err.line > 1


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        (
            "{name: cpu, nominalQuota: 9, borrowingLimit: 1}",
            "{name: cpu, nominalQuota: x9}",
            "flavors[0].resources[0].nominalQuota",
        ),
        (
            "{name: cpu, nominalQuota: 9, borrowingLimit: 1}",
            "{name: cpu, nominalQuota: .inf}",
            "flavors[0].resources[0].nominalQuota",
        ),
        ("lendingLimit: 2", "lendingLimit: 9", "flavors[0].resources[2].lendingLimit"),
        ("queueingStrategy: StrictFIFO", "queueingStrategy: LIFO", "spec.queueingStrategy"),
        ("      - {name: memory, nominalQuota: 1G}\n", "", "flavors[1].resources"),
        ("reclaimWithinCohort: Any", "reclaimWithinCohort: Never", "borrowWithinCohort.policy"),
        ("cohortName: team-ab\n  queueing", "queueing", "borrowingLimit"),
    ],
)
def test_bad_cluster_queue_fields(old, new, field):
    assert old in KUEUE
    err = _error(KUEUE.replace(old, new, 1))
    assert err.field is not None and err.field.endswith(field), err
    assert "document 5 (ClusterQueue 'team-a-cq')" in str(err)


def test_duplicate_and_unparsable():
    err = _error(KUEUE + "---\nkind: ResourceFlavor\nmetadata: {name: a100}\n")
    assert "defined twice" in str(err)
    err = _error("kind: ResourceFlavor\nmetadata: {name: [a\n")
    assert "not valid YAML" in str(err)
    err = _error("kind: ResourceFlavor\nmetadata: {}\n")
    assert err.field == "metadata.name"


KAI = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 4, limit: 8, overQuotaWeight: 2}
    cpu: {quota: -1, limit: -1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: ml-team}
spec:
  parentQueue: research
  priority: 200
  resources:
    gpu: {quota: 1}
---
apiVersion: kai.scheduler/v1
kind: SchedulingShard
metadata: {name: default}
spec:
  kValue: 0.5
  usageDBConfig:
    clientType: prometheus
    usageParams: {windowSize: 1w, halfLifePeriod: 10m}
"""


def test_kai_fields_and_defaults():
    config = kai_from_documents(parse_documents(KAI, "kai.yaml"))
    research = config.queues["research"]
    assert research.parent is None and research.priority == 100  # queue_types.go: default 100
    assert (
        research.resource("gpu").quota,
        research.resource("gpu").limit,
        research.resource("gpu").over_quota_weight,
    ) == (4, 8, 2)
    assert research.resource("cpu").quota == UNLIMITED
    ml = config.queues["ml-team"]
    assert ml.parent == "research" and ml.priority == 200
    assert (ml.resource("gpu").limit, ml.resource("gpu").over_quota_weight) == (UNLIMITED, 1.0)
    assert ml.resource("memory").quota == 0.0
    assert config.children("research") == ("ml-team",) and config.is_leaf("ml-team") and not config.is_leaf("research")
    f = config.fairness
    assert (f.k_value, f.half_life_s, f.window_s, f.time_based) == (0.5, 600.0, 7 * 86400.0, True)


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("parentQueue: research", "parentQueue: nobody", "spec.parentQueue", "not defined"),
        ("gpu: {quota: 4, limit: 8", "gpu: {quota: 4, limit: 2", "spec.resources.gpu.limit", "below quota"),
        ("gpu: {quota: 1}", "tpu: {quota: 1}", "spec.resources.tpu", "unknown resource"),
        ("halfLifePeriod: 10m", "halfLifePeriod: soon", "spec.usageDBConfig.usageParams.halfLifePeriod", "duration"),
        ("kind: SchedulingShard", "kind: Scheduler", "kind", "unknown kind"),
        ("gpu: {quota: 4,", "gpu: {quota: -2,", "spec.resources.gpu.quota", "-1"),
    ],
)
def test_bad_kai_documents(old, new, field, words):
    err = _error(KAI.replace(old, new), kai_from_documents)
    assert err.field == field and words in str(err) and err.path == "bad.yaml"


def test_kai_parent_cycle():
    text = KAI.replace(
        "metadata: {name: research}\nspec:\n", "metadata: {name: research}\nspec:\n  parentQueue: ml-team\n"
    )
    err = _error(text, kai_from_documents)
    assert "cycle" in str(err) and err.field == "spec.parentQueue"


def test_kueue_configuration_enables_fair_sharing():
    # apis/config/v1beta2/configuration_types.go: fairSharing present enables it; the
    # strategies must be one of the three accepted lists.
    conf = "---\napiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmetadata: {name: kueue}\n"
    config = kueue_from_documents(parse_documents(KUEUE, "q.yaml"))
    assert not config.fair_sharing
    text = KUEUE + conf + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
    config = kueue_from_documents(parse_documents(text, "q.yaml"))
    assert config.fair_sharing and config.preemption_strategies == ("LessThanInitialShare",)
    bad = KUEUE + conf + "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n"
    err = _error(bad)
    assert err.field == "fairSharing.preemptionStrategies" and "document 9" in str(err)


def test_numeric_looking_name_asks_for_quotes():
    # A Philly VC such as 6214e9 is a YAML float unless quoted.
    err = _error("kind: ResourceFlavor\nmetadata: {name: 6214e9}\n")
    assert err.field == "metadata.name" and "quote it" in str(err)
