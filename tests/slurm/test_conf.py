"""slurm.conf / gres.conf / sacctmgr readers and the cluster they give."""

from __future__ import annotations

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.errors import InputError
from shapeshift.slurm.assoc import read_assoc
from shapeshift.slurm.conf import read_slurm_conf
from shapeshift.slurm.values import expand_hostlist, time_seconds

CONF = """\
ClusterName=test   # a comment
SlurmctldHost=localhost
NodeName=DEFAULT CPUs=32 RealMemory=256000
NodeName=gpu[001-003] Gres=gpu:a100:8 NodeAddr=127.0.0.1 Port=17001
NodeName=cpu1 CPUs=16 RealMemory=64000 Sockets=2
PartitionName=gpu Nodes=gpu[001-003] Default=YES PriorityTier=2 PriorityJobFactor=10 MaxTime=1-00:00:00 \\
    TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=4 PreemptMode=REQUEUE
PartitionName=cpu Nodes=cpu1 MaxTime=60
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityDecayHalfLife=1-0
PriorityMaxAge=12:00:00
PriorityFavorSmall=YES
PriorityCalcPeriod=1
SchedulerType=sched/backfill
SchedulerParameters=bf_window=60,bf_resolution=5,bf_max_job_test=50,bf_continue,bf_interval=1,pack_serial_at_end
PreemptType=preempt/partition_prio
AccountingStorageType=accounting_storage/slurmdbd
"""


def _conf(tmp_path, text=CONF, name="slurm.conf"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_conf_nodes_partitions_and_parameters(tmp_path):
    conf = read_slurm_conf(_conf(tmp_path))
    assert [n.name for n in conf.nodes] == ["gpu001", "gpu002", "gpu003", "cpu1"]
    gpu = conf.nodes[0]
    assert (gpu.cpus, gpu.mem_mib, gpu.gpus, gpu.gpu_type) == (32, 256000, 8, "a100")
    assert (conf.nodes[3].cpus, conf.nodes[3].gpus) == (16, 0)
    part = conf.partition("gpu")
    assert part.default and part.priority_tier == 2 and part.priority_job_factor == 10
    assert part.max_time == 86400 and part.preempt_mode == "requeue"
    # Mem=0.25G is 0.25 per GB.
    assert dict(part.billing) == {"cpu": 1.0, "mem": 0.25, "gres/gpu": 4.0}
    assert conf.partition("cpu").max_time == 3600  # a bare limit is minutes
    p = conf.priority
    assert p.multifactor and (p.weight_age, p.weight_fairshare, p.weight_jobsize) == (1000, 10000, 0)
    assert (p.decay_half_life, p.max_age, p.calc_period, p.favor_small, p.fair_tree) == (86400, 43200, 60, True, True)
    s = conf.scheduler
    assert s.backfill and s.bf_continue
    assert (s.params["bf_window"], s.params["bf_resolution"], s.params["bf_max_job_test"]) == (3600, 5, 50)
    assert s.params["default_queue_depth"] == 100  # Slurm's default
    assert conf.preempt_type == "partition_prio"
    assert "SchedulerParameters.pack_serial_at_end" in conf.ignored and "AccountingStorageType" in conf.ignored
    assert "NodeName.Port" in conf.ignored  # each key as the file writes it


def test_conf_defaults_are_slurms(tmp_path):
    conf = read_slurm_conf(_conf(tmp_path, "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\n"))
    assert not conf.priority.multifactor and conf.priority.decay_half_life == 7 * 86400
    assert conf.priority.calc_period == 300 and conf.scheduler.backfill
    assert conf.scheduler.params["bf_window"] == 86400 and conf.scheduler.params["bf_resolution"] == 60
    assert conf.scheduler.params["bf_max_job_test"] == 500 and conf.partition("p").nodes == ("n1",)


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("NodeName=n1 CPUs=x\n", 1, "CPUs"),
        ("NodeName=n1\nPriorityWeightAge=-3\n", 2, "PriorityWeightAge"),
        ("NodeName=n[1-2\n", 1, "NodeName"),
        ("NodeName=n1\nPartitionName=p Nodes=n9\n", 2, "Nodes"),
        ("NodeName=n1\nSchedulerParameters=bf_window=abc\n", 2, "SchedulerParameters.bf_window"),
        ("NodeName=n1\nSchedulerType=sched/wiki\n", 2, "SchedulerType"),
        ("NodeName=n1\nPartitionName=p Nodes=n1 MaxTime=soon\n", 2, "MaxTime"),
    ],
)
def test_conf_bad_values_name_file_line_key(tmp_path, text, line, key):
    path = _conf(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_slurm_conf(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, key)


def test_gres_conf_fills_type_and_checks_count(tmp_path):
    _conf(tmp_path, "NodeName=g[1-2] CPUs=8 Gres=gpu:4\nPartitionName=p Nodes=ALL\n")
    (tmp_path / "gres.conf").write_text("NodeName=g[1-2] Name=gpu Type=v100 File=/dev/nvidia[0-3]\n")
    conf = read_slurm_conf(tmp_path / "slurm.conf")
    assert [(n.gpus, n.gpu_type) for n in conf.nodes] == [(4, "v100"), (4, "v100")]
    # More devices than Gres= declares: slurmctld ignores the excess (gres.c, "Ignoring
    # excess count"), so the node keeps its 4.
    (tmp_path / "gres.conf").write_text("NodeName=g1 Name=gpu File=/dev/nvidia[0-7]\n")
    assert [n.gpus for n in read_slurm_conf(tmp_path / "slurm.conf").nodes] == [4, 4]


def test_gres_conf_devices_add_up_per_node_and_must_match(tmp_path):
    # g1: two lines of two devices each (4 in all, as Gres=gpu:4 declares): read. g2: one
    # line of 2 devices against 4 declared: slurmctld would not use the node (gres.c,
    # _node_config_validate), so the file is refused at that line.
    _conf(tmp_path, "NodeName=g[1-2] CPUs=8 Gres=gpu:4\nPartitionName=p Nodes=ALL\n")
    lines = "NodeName=g1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=g1 Name=gpu File=/dev/nvidia[2-3] Cores=0-3\n"
    (tmp_path / "gres.conf").write_text(lines)
    conf = read_slurm_conf(tmp_path / "slurm.conf")
    assert [n.gpus for n in conf.nodes] == [4, 4]
    assert "gres.conf:Cores" in conf.ignored  # a key that places GPUs within a node
    (tmp_path / "gres.conf").write_text(lines + "NodeName=g2 Name=gpu Count=2\n")
    with pytest.raises(InputError) as err:
        read_slurm_conf(tmp_path / "slurm.conf")
    assert (err.value.line, err.value.field) == (3, "Count") and "node g2 has 2 GPU devices" in err.value.message


def test_gres_conf_fewer_devices_pass_under_config_overrides(tmp_path):
    # gres.c refuses a lower count only without config_overrides (slurmctld then uses
    # slurm.conf's counts): the 2-device line is read, the node keeps Gres='s 4.
    _conf(tmp_path, "NodeName=g1 CPUs=8 Gres=gpu:4\nPartitionName=p Nodes=ALL\nSlurmdParameters=config_overrides\n")
    (tmp_path / "gres.conf").write_text("NodeName=g1 Name=gpu Count=2\n")
    assert [n.gpus for n in read_slurm_conf(tmp_path / "slurm.conf").nodes] == [4]


def test_gres_conf_several_types_on_a_node_and_autodetect(tmp_path):
    # Gres=gpu:8 names no type and gres.conf gives two (a100 on 0-3, v100 on 4-7): Slurm
    # adds them; the replay models the first type, so the second is listed as ignored only
    # where Gres= names several. A global AutoDetect line leaves the count to the driver.
    nodes = "NodeName=g1 CPUs=8 Gres=gpu:8\nNodeName=g2 CPUs=8 Gres=gpu:a100:4,gpu:v100:4\n"
    _conf(tmp_path, nodes + "PartitionName=p Nodes=ALL\n")
    (tmp_path / "gres.conf").write_text(
        "NodeName=g[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-3]\n"
        "NodeName=g[1-2] Name=gpu Type=v100 File=/dev/nvidia[4-7]\n"
    )
    conf = read_slurm_conf(tmp_path / "slurm.conf")
    assert [(n.gpus, n.gpu_type) for n in conf.nodes] == [(8, "a100"), (8, "a100")]
    assert "NodeName.Gres:v100" in conf.ignored
    (tmp_path / "gres.conf").write_text("AutoDetect=nvml\nName=gpu Type=a100\n")
    _conf(tmp_path, "NodeName=g1 CPUs=8 Gres=gpu:a100:4\nPartitionName=p Nodes=ALL\n")
    assert [n.gpus for n in read_slurm_conf(tmp_path / "slurm.conf").nodes] == [4]


def test_gres_conf_type_must_be_the_one_gres_names(tmp_path):
    # Gres=gpu:a100:4, gres.conf Type=h100: none of the node's GPUs is an a100 there.
    _conf(tmp_path, "NodeName=g1 CPUs=8 Gres=gpu:a100:4\nPartitionName=p Nodes=ALL\n")
    (tmp_path / "gres.conf").write_text("NodeName=g1 Name=gpu Type=h100 File=/dev/nvidia[0-3]\n")
    with pytest.raises(InputError) as err:
        read_slurm_conf(tmp_path / "slurm.conf")
    assert (err.value.line, err.value.field) == (1, "Type")


def test_cluster_option_recognises_slurm_conf(tmp_path):
    cluster = load_cluster(_conf(tmp_path))
    assert cluster.total_gpus == 24 and dict(cluster.partitions)["gpu"] == ("gpu001", "gpu002", "gpu003")
    # 256000 MiB = 268.435456 GB.
    assert cluster.nodes[0].mem_gb == pytest.approx(268.435456) and cluster.nodes[0].gpu_type == "a100"
    assert cluster.slurm.priority.weight_fairshare == 10000
    overlap = _conf(tmp_path, "NodeName=n[1-2] CPUs=4\nPartitionName=a Nodes=ALL\nPartitionName=b Nodes=n2\n", "o.conf")
    with pytest.raises(InputError, match="share node n2"):
        load_cluster(overlap)


def test_value_syntaxes():
    assert expand_hostlist("gpu[01-03,7],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_hostlist("node[001-128]")[-1] == "node128"
    assert time_seconds("7-0") == 7 * 86400 and time_seconds("2-12") == 2 * 86400 + 12 * 3600
    assert time_seconds("90") == 5400 and time_seconds("1:30") == 90 and time_seconds("UNLIMITED") is None


def test_assoc_dump(tmp_path):
    path = tmp_path / "assoc.txt"
    path.write_text(
        "Cluster|Account|User|Partition|Share|ParentName\n"
        "c|root||||\nc|root|root||1|\nc|phys|||3|root\nc|phys|alice||1|\nc|chem|||parent|root\n"
    )
    assocs = {a.key: a for a in read_assoc(path)}
    assert assocs["phys"].shares == 3 and assocs["phys"].parent == "root"
    assert assocs["phys/alice"].parent == "phys" and assocs["chem"].shares == -1
    path.write_text("Account|User|Share\nphys||lots\n")
    with pytest.raises(InputError) as err:
        read_assoc(path)
    assert (err.value.line, err.value.field) == (2, "share")


def test_slurm_cluster_sets_only_its_own_fields(tmp_path):
    # The configuration rides on the cluster as ``slurm``; every other ClusterSpec field a
    # slurm.conf does not set keeps its default (a positional argument once landed the
    # configuration in a field added to ClusterSpec later, turning on GPU fractions).
    import dataclasses

    from shapeshift.model import ClusterSpec

    cluster = load_cluster(_conf(tmp_path))
    assert cluster.slurm is not None
    for f in dataclasses.fields(ClusterSpec):
        if f.name not in ("nodes", "partitions") and f.default is not dataclasses.MISSING:
            assert getattr(cluster, f.name) == f.default, f.name


def test_conf_preemption_keys(tmp_path):
    # PreemptMode=REQUEUE,WITHIN: the mode and its flag; PreemptExemptTime in Slurm's time
    # syntax (minutes bare); AuthInfo's cred_expire; youngest_first from PreemptParameters.
    text = (
        "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\nPreemptType=preempt/qos\n"
        "PreemptMode=REQUEUE,WITHIN\nPreemptExemptTime=2\nAuthInfo=socket=/x,cred_expire=30\n"
        "PreemptParameters=youngest_first\n"
    )
    conf = read_slurm_conf(_conf(tmp_path, text))
    assert (conf.preempt_type, conf.preempt_mode, conf.preempt_flags) == ("qos", "requeue", ("within",))
    assert (conf.preempt_exempt_time, conf.cred_expire, conf.preempt_youngest_first) == (120, 30, True)
    assert "PreemptExemptTime" not in conf.ignored
    # Slurm's defaults: no exempt time (-1), cred_expire 120, lowest-priority first.
    conf = read_slurm_conf(_conf(tmp_path, "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\n"))
    assert (conf.preempt_exempt_time, conf.cred_expire, conf.preempt_youngest_first) == (None, 120, False)


def test_conf_kill_wait_and_message_timeout(tmp_path):
    # read_config.c: KillWait and MessageTimeout are uint16 values (s_p_handle_uint16:
    # 0..65535, UNLIMITED/INFINITE = 65535), defaults 30 and 10 (DEFAULT_KILL_WAIT,
    # DEFAULT_MSG_TIMEOUT).
    head = "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\n"
    conf = read_slurm_conf(_conf(tmp_path, head))
    assert (conf.kill_wait, conf.msg_timeout) == (30, 10)
    conf = read_slurm_conf(_conf(tmp_path, head + "KillWait=5\nMessageTimeout=UNLIMITED\n"))
    assert (conf.kill_wait, conf.msg_timeout) == (5, 65535)
    assert "KillWait" not in conf.ignored and "MessageTimeout" not in conf.ignored


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("KillWait=inf\n", "KillWait"),
        ("KillWait=nan\n", "KillWait"),
        ("KillWait=-1\n", "KillWait"),
        ("KillWait=2.5\n", "KillWait"),
        ("MessageTimeout=65536\n", "MessageTimeout"),
        ("MessageTimeout=ten\n", "MessageTimeout"),
    ],
)
def test_conf_bad_kill_wait_or_message_timeout_names_file_line_key(tmp_path, text, key):
    path = _conf(tmp_path, "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\n" + text)
    with pytest.raises(InputError) as err:
        read_slurm_conf(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, key)


def test_conf_suspend_needs_gang_and_a_bad_mode_names_its_own_line(tmp_path):
    # read_config.c: "PreemptMode=SUSPEND requires GANG too" (slurmctld does not start);
    # SUSPEND,GANG is read. A bad PreemptMode names the PreemptMode line, not another.
    head = "NodeName=n1 CPUs=4 Gres=gpu:2\nPartitionName=p Nodes=ALL\nSchedulerParameters=bf_interval=5\n"
    for text, match in (("PreemptMode=SUSPEND\n", "requires GANG"), ("PreemptMode=PAUSE\n", "bad PreemptMode")):
        path = _conf(tmp_path, head + "PreemptType=preempt/qos\n" + text)
        with pytest.raises(InputError, match=match) as err:
            read_slurm_conf(path)
        assert (err.value.line, err.value.field) == (5, "PreemptMode")
    conf = read_slurm_conf(_conf(tmp_path, head + "PreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG\n"))
    assert (conf.preempt_mode, conf.preempt_flags) == ("suspend", ("gang",))
