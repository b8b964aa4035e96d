"""The mutants the mutation score leaves out (:mod:`mutation`), each with its reason:
equivalent mutants (no input, platform or allowed dependency version tells them apart), and
functions that run only while the package is imported. Kept apart from the script because it
is data, and long."""

from __future__ import annotations

_FLOAT64 = ("equivalent on NumPy 1.26 and 2 alike (both run with float32, 0-d and scalar "
            "inputs): the dtype of an operand or result that is float64 anyway (speed() casts "
            "its share and its result to float64; the tables are float64 arrays)")
PERF_NOT_COUNTED: dict[str, str] = {
    # the float64 casts of speed()'s result, p99_ms()'s interference and load and
    # violation_share()'s inputs are counted: without them a float32 input beside a 0-d
    # float64 array computes in float32 on NumPy 1.26 (value-based casting; numpy>=1.26 is
    # allowed), though not on NumPy 2
    **{f"cotenant.perf.mps.x_{fn}__mutmut_{n}": _FLOAT64 for fn, ns in (
        ("offline_speed", (3, 5)), ("violation_share", (74, 76))) for n in ns},
    **{f"cotenant.perf.{fn}__mutmut_{n}": _FLOAT64 for fn, ns in (
        ("jobs.xǁJobProfilesǁspeed", (3, 5)), ("jobs.x_online_occupancy", (2, 4)),
        ("slo.x_slo_ms", (3, 5)), ("interference.xǁInterferenceǁstretch", (7, 9))) for n in ns},
    **{f"cotenant.perf.{fn}__mutmut_{n}":
       "equivalent: a list or tuple of Python numbers makes a float64 array without the "
       "dtype, or an int64 one divided by a number into float64" for fn, ns in (
           ("interference.x__per_job", (20, 22)), ("mps.x__fit_online", (4, 6)),
           ("mps.x_mig_serial_fraction", (8, 10)), ("predictor.x__design", (11, 13, 18, 20)))
       for n in ns},
    **{f"cotenant.perf.{fn}__mutmut_{n}":
       "equivalent: NumPy infers a size given as any negative number, as it does -1"
       for fn, ns in (("kernels.x__coarsen", (13, 28)), ("predictor.x__design", (15,)))
       for n in ns},
    "cotenant.perf.mps.x_p99_ms__mutmut_30":
        "equivalent: the stand-in utilisation of an unstable queue is never read (its p99 is "
        "inf by the same test)",
    "cotenant.perf.mps.x_violation_share__mutmut_32":
        "equivalent: at a utilisation of exactly 1 the tail is 1 x exp(0) = 1, the unstable "
        "queue's share",
    "cotenant.perf.mps.x_violation_share__mutmut_71":
        "equivalent: a stable queue's tail is below 1 (rho < 1 times exp of a number <= 0), "
        "so a cap of 2 is the cap of 1",
    **{f"cotenant.perf.interference.x_stretch_from_p99_ratio__mutmut_{n}":
       "equivalent: at a share of 1 the speed is 1 whatever the serial fraction"
       for n in (15, 35)},
    "cotenant.perf.interference.x_stretch_from_p99_ratio__mutmut_3":
        "equivalent: a second share of 1 broadcasts a second, identical queue; only the first "
        "is read",
    "cotenant.perf.interference.x_stretch_from_p99_ratio__mutmut_18":
        "equivalent: at a ratio of exactly 1 the root is the bracket's lower end, 1, where "
        "the excess is exactly 0 (brentq returns it)",
    **{f"cotenant.perf.interference.x__tally__mutmut_{n}":
       "equivalent: _per_job reads the throughputs for any table name but 'p99'"
       for n in (21, 25, 26)},
    "cotenant.perf.jobs.x__key__mutmut_2":
        "equivalent: no key as None instead of '' (only its truth is read, and .get of "
        "either finds nothing)",
    **{f"cotenant.perf.kernels.x__coarsen__mutmut_{n}":
       "equivalent: the padding's dtype (int64 or float64 kinds hold the same -1, 0 and 1, "
       "and the result is cast to int8)" for n in (23, 26)},
    "cotenant.perf.kernels.x__coarsen__mutmut_41":
        "equivalent: where a group's kinds are all the same its second equals its first "
        "(groups hold at least 2: coarsening happens only above max_kernels)",
    "cotenant.perf.kernels.xǁKernelProfileǁsample__mutmut_37":
        "equivalent: at exactly max_kernels the groups are of ceil(1) = 1 kernel: the same "
        "durations and kinds",
    **{f"cotenant.perf.measured.x__migperf__mutmut_{n}":
       "equivalent: zip's strict flag in one of two zips over the same names and rows: the "
       "other still refuses a table without all four slices" for n in (31, 34, 35, 39, 42, 43)},
    "cotenant.perf.mig_profiles.x__derive__mutmut_33":
        "equivalent: a knot at the target's SMs is also below it, so the same-SMs branch "
        "takes it before the knots above are read",
    "cotenant.perf.mig_profiles.x__parse__mutmut_11":
        "equivalent: the line number of the empty file's stand-in header is never read",
    **{f"cotenant.perf.mig_profiles.x__parse__mutmut_{n}":
       "equivalent: zip's strict flag over a row and the header, whose lengths were checked "
       "equal just above" for n in (48, 51, 52)},
    "cotenant.perf.mig_profiles.x_load_csv__mutmut_12":
        "equivalent: 'UTF-8-SIG' for 'utf-8-sig' (codec names ignore case)",
    "cotenant.perf.mig_profiles.x_load_csv__mutmut_16":
        "equivalent: bytes.count from None counts from the start, as from 0",
    **{f"cotenant.perf.{fn}__mutmut_{n}":
       "equivalent: 'UTF-8' for 'utf-8' (codec names ignore case)"
       for fn, n in (("mig_profiles.x_default_table", 10), ("published.x_table", 8))},
    "cotenant.perf.mig_profiles.xǁProfileTableǁprofiles__mutmut_9":
        "equivalent: the place is shown only for a GPU the catalogue lacks, and check() has "
        "just found this one's canonical name among the table's",
    **{f"cotenant.perf.predictor.xǁPairPredictorǁpredict__mutmut_{n}":
       "equivalent: whether the inputs are copied (none is written to)" for n in (9, 11, 12)},
    **{f"cotenant.perf.predictor.xǁPairPredictorǁpredict__mutmut_{n}":
       "equivalent: np.clip returns the same values written in place or into a new array"
       for n in (64, 68, 73, 77)},
}
"""The perf part's mutants left out of :data:`NOT_COUNTED`, with the reason."""

IMPORT_TIME = "runs only at import (builds the GPU catalogue)"
NOT_COUNTED: dict[str, str] = {
    **PERF_NOT_COUNTED,
    "cotenant.policies.priority.registry.x_mps__mutmut_6":
        "equivalent: Blocks.SHARED dropped from mps's Scheduler, which is its default",
    "cotenant.model.gpu.x__a100_class__": IMPORT_TIME,
    "cotenant.model.gpu.xǁGpuCatalogǁ__init__": IMPORT_TIME,
    "cotenant.model.documents.x_loads_json__mutmut_4":
        "equivalent: 'UTF-8-SIG' for 'utf-8-sig' (codec names ignore case)",
    "cotenant.agent.api.x__p99_name__mutmut_5": "equivalent: partition for rpartition (with "
        "two or more slashes either the name or the tail holds one, and both are refused)",
    **{f"cotenant.agent.api.xǁ_Handlerǁ_body__mutmut_{n}":
       "equivalent: a header name in another case (HTTP header names ignore case)"
       for n in (3, 4, 21, 22)},
    **{f"cotenant.agent.api.xǁ_Handlerǁ_authorised__mutmut_{n}":
       "equivalent: a header name in another case (HTTP header names ignore case)"
       for n in (17, 18)},
    **{f"cotenant.agent.api.xǁ_Handlerǁ_dispatch__mutmut_{n}":
       "equivalent: the path is the text before the first '?' however often it is split"
       for n in (6, 9)},
    **{f"cotenant.policies.colocation.guard.x_report_window_s__mutmut_{n}":
       "equivalent: the rates' or the result's dtype (the arithmetic is in float64 either way; "
       "no division by zero is left to warn about)" for n in (3, 5, 6, 33, 35)},
    "cotenant.policies.colocation.guard.x_report_window_s__mutmut_16":
        "equivalent: a rate of 0 counted as > 0 gives a window of 1e300 s, dropped as inf",
    **{f"cotenant.policies.colocation.recovery.xǁRecoveryǁdelay_s__mutmut_{n}":
       "equivalent: the result's dtype (np.minimum of float64 arrays is float64)"
       for n in (23, 25)},
    **{f"cotenant.policies.colocation.share.xǁDynamicShareǁhold__mutmut_{n}":
       "equivalent: a current share of 0 taken as none yet (the need, never below 0, is "
       "applied either way)" for n in (13, 14)},
    "cotenant.report.colocation.x_colocation_plot": "a figure, not a table (this part is "
        "the report tables)",
    "cotenant.report.colocation.x_frontier_plot": "a figure, not a table (this part is the "
        "report tables)",
    "cotenant.policies.colocation.contract.xǁGpuStateǁreset__mutmut_3":
        "equivalent: reset copies no field that GpuState.new sets from now_s",
    **{f"cotenant.policies.colocation.share.x_need__mutmut_{n}":
       "equivalent: x / ones(n) for x * ones(n) (the same values)" for n in (19, 28)},
    **{f"cotenant.policies.colocation.share.x_need__mutmut_{n}":
       "equivalent: the target's or stretch's dtype (multiplied by float64 ones, the result "
       "is float64 whatever it was)" for n in (21, 23, 30, 32)},
    **{f"cotenant.policies.colocation.share.x_p99_at__mutmut_{n}":
       "equivalent: the share's dtype (divided by 100.0, the result is float64)"
       for n in (5, 7)},
    **{f"cotenant.policies.colocation.share.x__table__mutmut_{n}":
       "equivalent: the table cache's size limit changes when tables are rebuilt, not what "
       "they hold" for n in (3, 4)},
    **{f"cotenant.policies.colocation.share.x__bisect__mutmut_{n}":
       "equivalent: the bisection's bounds as float64 hold the same whole numbers 0-100 "
       "(exact), and the result is cast to int64" for n in (41, 43, 47, 50)},
    "cotenant.policies.colocation.share.x__bisect__mutmut_73":
        "equivalent: astype(None) is astype(float64)",
    "cotenant.policies.colocation.share.xǁDynamicShareǁhold__mutmut_25":
        "equivalent: >= for > where both branches give the same value at equality",
    "cotenant.policies.colocation.share.xǁDynamicShareǁhold__mutmut_7":
        "equivalent: a current share of -1 (none yet) kept as is lies below every need "
        "(0-100), so the raise branch gives the need either way",
    "cotenant.policies.colocation.share.xǁDynamicShareǁneeded__mutmut_21":
        "equivalent: at a need of exactly 100, max(100, min_share) is 100 (min_share is "
        "validated to be at most 100)",
    **{f"cotenant.policies.colocation.share.xǁFixedShareǁ{fn}__mutmut_{n}":
       "equivalent: the share is a validated int, and numpy.full of an int is int64"
       for fn in ("hold", "needed") for n in (3, 6)},
    **dict.fromkeys((
        "cotenant.policies.placement.fgd.xǁFgdPolicyǁscore__mutmut_36",
        "cotenant.policies.placement.fgd.xǁFgdPolicyǁscore__mutmut_39",
        "cotenant.policies.placement.fit.x__gpu_choice__mutmut_7",
        "cotenant.policies.placement.fit.x__gpu_choice__mutmut_10",
        "cotenant.policies.placement.packing.xǁGpuClusteringPolicyǁscore__mutmut_14",
        "cotenant.policies.placement.packing.xǁGpuClusteringPolicyǁscore__mutmut_17",
        "cotenant.policies.placement.packing.xǁGpuClusteringPolicyǁscore__mutmut_79",
        "cotenant.policies.placement.packing.xǁGpuClusteringPolicyǁscore__mutmut_82",
        "cotenant.policies.placement.packing.xǁGpuPackingPolicyǁscore__mutmut_5",
        "cotenant.policies.placement.packing.xǁGpuPackingPolicyǁscore__mutmut_8",
        "cotenant.policies.placement.packing.xǁGpuPackingPolicyǁscore__mutmut_75",
        "cotenant.policies.placement.packing.xǁGpuPackingPolicyǁscore__mutmut_78",
        "cotenant.policies.placement.random_.xǁRandomPolicyǁscore__mutmut_15",
        "cotenant.policies.placement.pack.xǁCotenantPackPolicyǁscore__mutmut_40",
        "cotenant.policies.placement.pack.xǁCotenantPackPolicyǁscore__mutmut_43"),
        "equivalent: numpy.full of a Python int is int64 without the dtype"),
    **{f"cotenant.policies.placement.pack.xǁCotenantPackPolicyǁpacking_cost__mutmut_{n}":
       "equivalent: the per-size table cache missed or not kept: the table is built again, "
       "with the same values" for n in (1, 2, 12)},
    "cotenant.policies.placement.pack.xǁCotenantPackPolicyǁpacking_cost__mutmut_11":
        "equivalent: a table one entry longer is never read there (free milli is at most 1000)",
    **{f"cotenant.policies.placement.pack.xǁCotenantPackPolicyǁ__init____mutmut_{n}":
       "equivalent: zip's strict flag over the typical shapes and their frequencies, equally "
       "long by construction" for n in (12, 15, 16)},
    **{f"cotenant.policies.placement.pack.xǁCotenantPackPolicyǁ__init____mutmut_{n}":
       "equivalent: with no GPU pods both rates are 0 and either at 0 switches the stranding "
       "term off, so one of them at 1.0 changes nothing" for n in (34, 40)},
    "cotenant.policies.placement.pack.xǁCotenantPackPolicyǁscore__mutmut_69":
        "equivalent: the tie-break of a GPU the pod does not fit is overwritten by the "
        "lowest int64 on the next line",
    "cotenant.policies.placement.packing.xǁGpuPackingPolicyǁscore__mutmut_60":
        "equivalent: the floor of 50 (or 51) never binds: a GPU has at most 1000 free milli, "
        "so 100 - floor(free / 100) is at least 90",
    "cotenant.policies.placement.prices.x__knapsack__mutmut_9":
        "equivalent: an item priced 0 never raises K(g) above K(g - 1), which K(g) starts from",
    "cotenant.policies.placement.prices.x__knapsack__mutmut_13":
        "equivalent: from g = 0, K(0) is read from the zeros not yet filled and no item fits",
    "cotenant.policies.placement.random_.xǁRandomPolicyǁscore__mutmut_11":
        "equivalent: the picked node scores 101 instead of 100, still above every other (0)",
    "cotenant.policies.placement.fgd.xǁFgdPolicyǁscore__mutmut_19":
        "equivalent: -2 for -1 on the GPUs a pod does not fit: sigmoid scores are 0-100, and "
        "a feasible node has a GPU it fits, so the node's best GPU and score are the same",
    **dict.fromkeys((
        "cotenant.agent.supervisor.xǁSupervisorǁstop__mutmut_40",
        "cotenant.agent.supervisor.xǁSupervisorǁstop__mutmut_65",
        "cotenant.agent.supervisor.xǁSupervisorǁ_recover__mutmut_25"),
        "equivalent: a record holds a pid exactly while its status has a process (each "
        "transition sets or clears both), so `and` and `or` of the two agree"),
    "cotenant.agent.supervisor.xǁSupervisorǁ__init____mutmut_13":
        "equivalent: not yet recovered as None instead of False (only its truth is read)",
    "cotenant.agent.supervisor.xǁSupervisorǁ__init____mutmut_19":
        "equivalent: float('-INF') is float('-inf') (the name ignores case)",
    "cotenant.agent.supervisor.xǁSupervisorǁ_read_xids__mutmut_4":
        "equivalent: the XID feature flag set to None instead of False (only its truth is "
        "read: XID reading stays off)",
    "cotenant.agent.supervisor.xǁSupervisorǁtick__mutmut_1":
        "equivalent: a tick at the same wall time as the last is a step back of 0 s, which "
        "moves no backoff (each waiting record is written back unchanged)",
    **{f"cotenant.agent.supervisor.xǁSupervisorǁ_exited__mutmut_{n}":
       "equivalent: an int return code that is non-zero and at most 0 (or below 1) is "
       "negative" for n in (29, 30)},
    "cotenant.agent.supervisor.xǁSupervisorǁ_exited__mutmut_31":
        "equivalent: the signal number is read only for a SIGNAL exit, which always has a "
        "negative return code, so the fallback (0 or 1) is never used",
    **dict.fromkeys((
        "cotenant.agent.supervisor.xǁSupervisorǁ_exited__mutmut_12",
        "cotenant.agent.supervisor.xǁSupervisorǁ_reap__mutmut_19"),
        "equivalent: a record's `since` is a wall time or the state's default 0, never "
        "negative, so below -1 and below -2 are both never"),
    "cotenant.agent.supervisor.xǁSupervisorǁ_exited__mutmut_58":
        "equivalent: a SIGKILL deadline left after an exit is never read: every way back to "
        "stopping or restarting sets a new one first (`_signal_stop`)",
    **{f"cotenant.agent.supervisor.xǁSupervisorǁ_start__mutmut_{n}":
       "equivalent: the launch id's length (any random hex string tells the start apart)"
       for n in (7, 8)},
    **{f"cotenant.agent.supervisor.xǁSupervisorǁ_start__mutmut_{n}":
       "equivalent: the spec's JSON in the environment with or without spaces reads back "
       "the same" for n in (16, 18)},
    **dict.fromkeys((
        *(f"cotenant.agent.supervisor.xǁSupervisorǁ_start__mutmut_{n}"
          for n in (47, 50, 52, 70, 75, 76)),
        *(f"cotenant.agent.supervisor.xǁSupervisorǁ_restart__mutmut_{n}" for n in (14, 20, 25)),
        *(f"cotenant.agent.supervisor.xǁSupervisorǁ_recover_start__mutmut_{n}"
          for n in (24, 28, 29))),
        "equivalent: the launch id of a waiting or failed record is never read (recovery "
        "matches only a starting record's, or one with a process, against the live "
        "processes), and the next start sets a new one; None is even stored as '' (the "
        "column's NOT NULL default under INSERT OR REPLACE)"),
    "cotenant.agent.supervisor.xǁSupervisorǁ_recover_process__mutmut_43":
        "equivalent: the time of a resume at recovery's SIGTERM: no stopping or restarting "
        "workload is paused then (pauses live in memory, only running ones are paused, and a "
        "stop or restart resumes its own)",
    "cotenant.agent.faults.x_recovery_fault__mutmut_1":
        "equivalent: the default signal number, 0 or 1 (SIGHUP), is neither SIGINT nor "
        "SIGTERM, and only a SIGNAL exit reads it",
    **{f"cotenant.policies.flexmig.allocate.x_one_to_many__mutmut_{n}":
       "equivalent: the cap of the ask + 6 slices only prunes (a set of instances 7 or more "
       "slices over the ask can drop one, of at most 7 slices, and still reach the ask with "
       "fewer instances, so it never wins); this mutant lifts or widens it, and a GPU added "
       "with no instance never beats the entry it came from" for n in (3, 21, 23)},
    **{f"cotenant.policies.flexmig.allocate.x_one_to_many__mutmut_{n}":
       "equivalent: the GPU count starting at 1 or stepping by 2 shifts or scales every "
       "key alike, so their order is the same" for n in (13, 29)},
    "cotenant.policies.flexmig.allocate.x_one_to_many__mutmut_43":
        "equivalent: total + ask orders the totals as total - ask does",
    **{f"cotenant.policies.flexmig.allocate.x_one_to_many__mutmut_{n}":
       "equivalent: each total has one entry and the excess follows from it, so no two "
       "entries tie on the first three fields and the fourth is never compared"
       for n in (47, 49, 51)},
    **{f"cotenant.policies.flexmig.layouts.x__compute_profiles__mutmut_{n}":
       "equivalent: sorting the names as text sorts them by compute slices (one profile per "
       "compute size, each name starting with its one-digit slice count)" for n in (3, 5)},
    **{f"cotenant.policies.flexmig.layouts.x_static_layouts__mutmut_{n}":
       "equivalent: the largest name as text is the largest by compute slices (one profile "
       "per compute size, each name starting with its one-digit slice count)"
       for n in (56, 58)},
    "cotenant.policies.flexmig.layouts.x_static_layouts__mutmut_25":
        "equivalent: with no work at all every size's want is 0 whatever it is divided by",
    "cotenant.policies.placement.optimum.relaxation.x__paths__mutmut_13":
        "equivalent: a loss arc without flow is listed after its vertex's arcs with flow "
        "(vertex 0 has none), and by flow conservation a path reaches a vertex only as often "
        "as flow leaves it, so it is never taken",
    "cotenant.policies.placement.optimum.relaxation.x__paths__mutmut_20":
        "equivalent: a loss arc ends the path whether it jumps to top or beyond, and its "
        "size is not recorded",
    **{f"cotenant.policies.placement.optimum.relaxation.x__pool_rows__mutmut_{n}":
       "equivalent: every inner vertex is the head of some arc (the graph keeps only "
       "vertices an arc reaches), so the default is never used" for n in (47, 49)},
    **{f"cotenant.policies.placement.optimum.relaxation.x__pool_rows__mutmut_{n}":
       "equivalent: every inner vertex has its loss arc among the arcs out of it, so the "
       "default is never used" for n in (51, 53)},
    "cotenant.policies.placement.optimum.relaxation.x_pools_of__mutmut_11":
        "equivalent: negating every spec test negates every model's signature: the same "
        "grouping",
    "cotenant.policies.placement.optimum.relaxation.x_relax__mutmut_13":
        "equivalent: 1000 / quantum is whole (the quantum divides 1000), and a float vertex "
        "arises only on a loss arc's jump, which ends the path",
    **{f"cotenant.policies.placement.optimum.relaxation.x_relax__mutmut_{n}":
       "equivalent: scipy's milp bounds every variable to [0, inf) by default, the bounds "
       "given" for n in (116, 121, 129)},
    "cotenant.policies.placement.optimum.relaxation.x_relax__mutmut_143":
        "equivalent: HiGHS's log goes to file descriptor 1, which points at /dev/null during "
        "the solve (a solve with the log on was seen to write nothing to stdout or stderr)",
    "cotenant.policies.placement.optimum.relaxation.x_relax__mutmut_195":
        "equivalent: the rounded solution as float64 instead of int64: every use converts "
        "it with int() or compares it with 0",
    "cotenant.policies.placement.optimum.plan.x_realise__mutmut_65":
        "equivalent: break for continue at a CPU-only pod: the pods left out come first and "
        "are GPU pods, and the rest are sorted by GPU demand, so only CPU-only pods (0) "
        "follow the first",
    "cotenant.policies.placement.optimum.plan.x_realise__mutmut_67":
        "equivalent: the last pass's item's pods are never read (it is placed by its GPUs, "
        "milli, CPU, memory and spec mask)",
    "cotenant.policies.placement.optimum.plan.x_realise__mutmut_80":
        "equivalent: a fractional pod asks for one GPU, so its num_gpu is the 1 given",
    "cotenant.policies.placement.optimum.plan.x_realise__mutmut_82":
        "equivalent: a fractional pod's item goes to _tightest_gpu, which does not read the "
        "item's GPU count",
    "cotenant.policies.placement.optimum.plan.x_realise__mutmut_84":
        "equivalent: a whole-GPU pod's item goes to _whole_node, which does not read milli",
    "cotenant.policies.placement.optimum.plan.x__tightest_gpu__mutmut_18":
        "equivalent: any mark above 1000 tells a GPU the pod does not fit (the test is "
        "> 1000)",
    **{f"cotenant.policies.placement.optimum.plan.x__items__mutmut_{n}":
       "equivalent: an item's milli is never read by the first pass (_whole_node and "
       "_single_gpu take whole free GPUs)" for n in (17, 47, 57, 66)},
    **{f"cotenant.policies.partition.reconfig.rules.x__match__mutmut_{n}":
       "equivalent: zip's strict flag over the assignment's rows and columns, equally long "
       "by construction" for n in (37, 40, 41)},
    "cotenant.policies.partition.reconfig.rules.x__match__mutmut_34":
        "equivalent: the placement's initial entries are all overwritten (the pool has at "
        "least as many GPUs as the plan, so the assignment gives every plan GPU one)",
    **{f"cotenant.policies.partition.reconfig.pool.x_must_drain__mutmut_{n}":
       "equivalent: zip's strict flag over a node's GPUs before and after a stage, per_node "
       "of each by construction" for n in (11, 14, 17)},
    "cotenant.policies.partition.reconfig.pool.xǁPoolǁrate__mutmut_2":
        "equivalent: a service outside the spec is never asked for (temporary replicas are "
        "for the spec's services, and serving() counts only those)",
    **{f"cotenant.policies.partition.reconfig.pool.xǁPoolǁserving__mutmut_{n}":
       "equivalent: the replica counts as float64 hold the same whole numbers, compared "
       "only with 0" for n in (6, 8)},
    "cotenant.policies.partition.reconfig.pool.x_move__mutmut_22":
        "equivalent: move is given final=False only by borrow, with instances added in free "
        "slots, so the layout differs and this return is not reached",
    **{f"cotenant.policies.partition.reconfig.search.xǁ_Searchǁload__mutmut_{n}":
       "equivalent: the replica counts as float64 hold the same whole numbers (moved by "
       "+-1), compared only with 1" for n in (6, 8)},
    **{f"cotenant.policies.partition.reconfig.search.xǁ_Searchǁ__init____mutmut_{n}":
       "equivalent: the floor or today's replicas padded with more zeros past the last "
       "service, an index no read reaches (a service is item % n, and the result keeps the "
       "spec's first)" for n in (49, 61)},
    **{f"cotenant.policies.partition.reconfig.search.xǁ_Searchǁ__init____mutmut_{n}":
       "equivalent: today's replicas as float64 hold the same whole numbers, compared only "
       "with 0" for n in (58, 60)},
    "cotenant.policies.partition.reconfig.search.xǁ_Spaceǁ__init____mutmut_2":
        "equivalent: _Space.problem is never read",
    **{f"cotenant.policies.partition.reconfig.search.xǁ_Spaceǁfitting__mutmut_{n}":
       "equivalent: the cache missed or not kept: the placements are computed again, the "
       "same" for n in (1, 2, 32)},
    "cotenant.policies.partition.reconfig.search.xǁ_Searchǁblocker__mutmut_4":
        "equivalent: at s == spec (the first service the spec dropped) the checks below give "
        "None too: its floor, rate and replicas today are all 0",
    "cotenant.policies.partition.reconfig.stages.x__release__mutmut_30":
        "equivalent: the stage given the released replicas is the one _advance has just "
        "appended, a final one, so final=True by default is the same",
    "cotenant.policies.partition.reconfig.stages.x__advance__mutmut_12":
        "equivalent: a node's lending flag as None instead of False (only its truth is read)",
    **{f"cotenant.policies.partition.reconfig.stages.x_check_stages__mutmut_{n}":
       "equivalent: one more node past the last one a stage names, empty today and in the "
       "goal: it serves nothing and never differs" for n in (20, 25, 26)},
    **{f"cotenant.policies.partition.reconfig.stages.x_{fn}__mutmut_{n}":
       "equivalent: today's or the goal's GPUs padded with more empty GPUs than the nodes "
       "hold: node_gpus never slices past the last node"
       for fn, ns in (("check_stages", (31, 37)), ("node_stages", (19, 25))) for n in ns},
    **{f"cotenant.policies.partition.reconfig.rules.x_order_by_rules__mutmut_{n}":
       "equivalent: grow's or shrink's progress flag starting as None instead of False "
       "(only its truth is read)" for n in (57, 148)},
    "cotenant.policies.partition.reconfig.rules.x_order_by_rules__mutmut_98":
        "equivalent: release's flag starts as (g, p) in temps, which is False for every "
        "instance shrink releases but its temporary replicas, and those always serve a "
        "service, so the flag is set True below (or release returns first)",
    "cotenant.policies.partition.reconfig.rules.x_order_by_rules__mutmut_179":
        "equivalent: a repartitioned GPU's whole flag None instead of False: only its truth "
        "is read, and in the states compared for a repeat it stands for False alike",
    **{f"cotenant.policies.partition.reconfig.rules.x_order_by_rules__mutmut_{n}":
       "equivalent: whole is decided before any step, when a GPU beyond today's (added "
       "empty) has no instance, so only today's GPUs are repartitioned and g < "
       "len(current) holds there" for n in (185, 187, 188)},
    "cotenant.policies.partition.reconfig.rules.x_order_by_rules__mutmut_27":
        "equivalent: the state padded with more empty GPUs than the pool: no loop reaches "
        "past the pool's, and an empty GPU serves nothing",
    **{f"cotenant.policies.partition.problem.x_served__mutmut_{n}":
       "equivalent: np.bincount with float weights is float64, and so is it times a float"
       for n in (28, 30)},
    "cotenant.policies.partition.problem.x_verify__mutmut_6":
        "equivalent: the set of layouts checked only saves time; without it each layout is "
        "checked again, with the same outcome",
    **{f"cotenant.policies.partition.formulation.x_formulate__mutmut_{n}":
       "equivalent: astype(None) or astype(float) is astype(float64)"
       for n in (4, 61, 67, 74, 89, 96)},
    **{f"cotenant.policies.partition.packing.x_repack__mutmut_{n}":
       "equivalent: astype(None) is astype(float64)" for n in (6, 21)},
    "cotenant.policies.partition.packing.x_repack__mutmut_39":
        "equivalent: the rounded counts, assigned into an int64 array, are cast back to the "
        "same whole numbers",
    **{f"cotenant.policies.partition.formulation.x_distinct_layouts__mutmut_{n}":
       "equivalent: a list of Python ints (never empty: some layout is undominated) makes "
       "an int64 array without the dtype" for n in (19, 21)},
    **{f"cotenant.policies.partition.greedy.x_instance_counts__mutmut_{n}":
       "equivalent: a profile without a rate ranked at efficiency 0 or -2 instead of -1 still "
       "ranks below every profile with one (efficiency > 0), and a service with no rate at "
       "all has no demand" for n in (12, 16)},
    "cotenant.policies.partition.greedy.x_instance_counts__mutmut_21":
        "equivalent: lexsort's default axis is the last, which is axis 1 of the (S, P) keys",
    "cotenant.policies.partition.greedy.x_instance_counts__mutmut_44":
        "equivalent: the whole counts as float64 hold the same whole numbers, assigned into "
        "the int64 counts",
    **{f"cotenant.policies.partition.greedy.x_instance_counts__mutmut_{n}":
       "equivalent: at a demand of 0 the whole count (0 / rate) and the rest (0) are 0 "
       "either way" for n in (51, 61)},
    "cotenant.policies.partition.greedy.x_instance_counts__mutmut_79":
        "equivalent: a profile with no rate never covers a rest, which is positive on every "
        "row it is read for",
    **{f"cotenant.policies.partition.greedy.x_pack__mutmut_{n}":
       "equivalent: the layout use as float64 holds the same whole numbers; every reader "
       "converts it with int()" for n in (6, 8)},
    "cotenant.sim.fragmentation.x_run_fragmentation__mutmut_14":
        "equivalent: the tie-break ranks as float64 hold the same whole numbers 0..n-1 "
        "(exact), and only their argmin is read (select_node)",
    "cotenant.sim.fragmentation.x_run_fragmentation__mutmut_91":
        "equivalent: 100 * demand / capacity put in an int64 array is truncated, as // "
        "floors it (demand is never negative)",
    "cotenant.sim.fragmentation.xǁFragmentationRunǁcurve__mutmut_25":
        "equivalent: the weighted sums without a minimum length end at the highest percent "
        "reached; they are read only where counts (still padded) has an arrival, and a "
        "slice past their end leaves out only entries that would be 0",
    **{f"cotenant.sim.fragmentation.xǁFragmentationRunǁcurve__mutmut_{n}":
       "equivalent: sums and counts one entry longer are never read (a window ends before "
       "x + 2 <= top + 2)" for n in (27, 29, 36, 38)},
    "cotenant.sim.fragmentation.x_point_window__mutmut_2":
        "equivalent: the rounded percents as float64 hold the same whole numbers, compared "
        "only with == and <= 1",
    **{f"cotenant.sim.bound.x_bound_points__mutmut_{n}":
       "equivalent: np.cumsum of a list of Python ints is int64 without the dtype (an empty "
       "one, no arrivals, gives an empty window either way)" for n in (14, 16)},
    "cotenant.sim.bound.xǁBoundPointǁpercent_of__mutmut_5":
        "equivalent: float('NAN') is float('nan') (the name ignores case)",
    **{f"cotenant.sim.colocation.records.x_common_finished__mutmut_{n}":
       "equivalent: np.logical_and of boolean arrays is boolean without the dtype"
       for n in (6, 8)},
    **dict.fromkeys((
        *(f"cotenant.sim.colocation.frontier.x_settings__mutmut_{n}"
          for n in (20, 22, 36, 83, 89, 95)),
        "cotenant.sim.colocation.frontier.x_frontier__mutmut_8"),
        "equivalent: a policy's name in capitals (the registry ignores case)"),
    **{f"cotenant.policies.partition.formulation.x_formulate__mutmut_{n}":
       "equivalent: the instance rows list a coordinate, explicit zeros included, for every "
       "(profile, layout) pair, so the shape scipy infers is the one given" for n in (22, 24)},
    **{f"cotenant.policies.partition.formulation.x_min_slices__mutmut_{n}":
       "equivalent: a dtype NumPy gives anyway (a list of Python ints is int64) or that the "
       "callers cast away (slice_bound sums to int, formulate casts to float)"
       for n in (11, 87)},
    "cotenant.policies.partition.formulation.x_min_slices__mutmut_9":
        "equivalent: one more knapsack row than the loop fills is never read",
    "cotenant.policies.partition.formulation.x_min_slices__mutmut_21":
        "equivalent: -2 for -1 as the not-yet-met mark: only its sign is read",
    "cotenant.policies.partition.formulation.x_min_slices__mutmut_25":
        "equivalent: a knapsack width of 0 meets no positive target (its best is 0)",
    "cotenant.policies.partition.formulation.x_min_slices__mutmut_32":
        "equivalent: the first width at which a service's target is met is the weight of an "
        "exact combination of instances, which best[c - w] + rate reaches without carrying "
        "best[c - 1] over, and carrying over less never meets it earlier",
    **{f"cotenant.policies.partition.formulation.x_min_slices__mutmut_{n}":
       "equivalent: no division in the block can divide by zero (the divisor is a positive "
       "rate per slice or inf), so the divide error state changes nothing"
       for n in (59, 61)},
    "cotenant.policies.partition.formulation.x_min_slices__mutmut_77":
        "equivalent: a service with demand has a rate (PartitionProblem refuses one without), "
        "so its best rate per slice is positive, and a service without demand is never "
        "bounded past the knapsack",
    "cotenant.policies.partition.greedy.x_pack__mutmut_19":
        "equivalent: idle slices break ties only among layouts of equal gain, where capacity "
        "minus gain and capacity plus gain order them alike",
    **{f"cotenant.policies.partition.greedy.x_pack__mutmut_{n}":
       "equivalent, only slower: one copy a round instead of a batch: the layout chosen stays "
       "the best while its multiple lasts (its gain stays its capacity, no other layout's "
       "gain grows, the tie-break is by index), so the same layouts are taken"
       for n in (29, 30, 32)},
    "cotenant.policies.partition.greedy.x_pack__mutmut_33":
        "equivalent: where the chosen layout is not full, some profile has fewer instances "
        "left than the layout holds, so the batch is 0 copies, raised to 1 as before",
    "cotenant.policies.partition.greedy.x_pack__mutmut_35":
        "equivalent: int() of a non-negative float quotient is the floor quotient",
    **{f"cotenant.policies.partition.packing.x_cheapest_patterns__mutmut_{n}":
       "equivalent: 'STABLE' is read as 'stable' (NumPy's kind names ignore case)"
       for n in (19,)},
    "cotenant.policies.partition.packing.x_cheapest_patterns__mutmut_41":
        "equivalent: chunks starting at every service instead of every 2048th overlap and "
        "write the same rows again with the same values (only slower)",
    **{f"cotenant.policies.partition.packing.x_patterns__mutmut_{n}":
       "equivalent: a list of Python int tuples makes an int64 array without the dtype, and "
       "NumPy infers a dimension from any negative size" for n in (49, 51, 53)},
    "cotenant.policies.partition.packing.x_repack__mutmut_1":
        "equivalent: with 0 s HiGHS is not called (solve_small answers None), so repack "
        "answers None either way",
    **{f"cotenant.policies.partition.planner.x_build_problem__mutmut_{n}":
       "equivalent: the SLOs as given (int or float) look up the same batch (searchsorted "
       "compares numbers)" for n in (7, 9)},
    **{f"cotenant.policies.partition.planner.x_build_problem__mutmut_{n}":
       "equivalent: every catalog model's largest compute size has one profile and profile "
       "names start with their one-digit compute size, so the largest is also the largest "
       "name as text" for n in (93, 95)},
    "cotenant.policies.partition.problem.x_realise__mutmut_6":
        "equivalent: a service needing 0 instances of a profile is repeated 0 times",
    "cotenant.policies.partition.problem.x_realise__mutmut_15":
        "equivalent: 'STABLE' is read as 'stable' (NumPy's kind names ignore case)",
    **{f"cotenant.policies.partition.problem.x_realise__mutmut_{n}":
       "equivalent: zip's strict flag over a layout's placements and the columns made from "
       "them, equally long by construction" for n in (34, 37, 38)},
    "cotenant.policies.partition.problem.xǁPartitionProblemǁ__post_init____mutmut_2":
        "equivalent: astype(None) is astype(float64)",
    "cotenant.policies.partition.bounds.x_relaxation__mutmut_18":
        "equivalent: 'highs' is linprog's default method from SciPy 1.11, the project's floor",
    "cotenant.policies.partition.bounds.x_relaxation__mutmut_27":
        "equivalent: linprog lower-cases the method's name",
    **{f"cotenant.policies.partition.bounds.x_relaxation__mutmut_{n}":
       "equivalent: HiGHS's dual values come back as float64, cast or not" for n in (35, 37)},
    **{f"cotenant.policies.partition.auto.x__rounded_plan__mutmut_{n}":
       "equivalent: the plan handed to verify is named and bounded only for the message of "
       "an error that is caught here" for n in (15, 17, 18, 23, 24, 25, 26)},
    "cotenant.policies.partition.planner.x_plan_spec__mutmut_2":
        "equivalent: plan_spec canonicalises the solver's name first ('AUTO' is 'auto')",
    **dict.fromkeys(
        ("cotenant.policies.partition.highs.x__milp__mutmut_23",
         "cotenant.policies.partition.highs.x_solve_small__mutmut_20"),
        "equivalent: integrality np.ones_like(None) is array(1, dtype=object), which SciPy's "
        "milp broadcasts to the cost's shape and casts to uint8: every variable integer, as "
        "with np.ones_like(cost) (SciPy 1.11.0 and 1.17.1; an empty cost is refused before "
        "integrality is read)"),
    "cotenant.policies.partition.milp.xǁPendingMilpǁresult__mutmut_11":
        "equivalent: getattr without its default; the result is always SciPy milp's "
        "OptimizeResult, which sets mip_dual_bound every time (None without a bound; SciPy "
        "1.11.0 and 1.17.1)",
    "cotenant.policies.partition.genetic.x__mutate__mutmut_5":
        "equivalent: Generator.choice(replace=None) for replace=False (it tests truth)",
    "cotenant.policies.partition.genetic.x__evolve__mutmut_47":
        "equivalent: break for return at the end of the generation loop, nothing after it",
    "cotenant.policies.partition.mcts.x__search__mutmut_22":
        "equivalent: break for return at the end of the rollout loop, nothing after it",
    **{f"cotenant.policies.partition.search.x_prune__mutmut_{n}":
       "equivalent: the keep mask as float 1.0/0.0, read only by truth value"
       for n in (11, 13)},
    "cotenant.policies.partition.search.x_prune__mutmut_20":
        "equivalent: None stored in a bool array is False, the original's value",
    **{f"cotenant.policies.partition.search.x_prune__mutmut_{n}":
       "equivalent: zip's strict flag over the configurations and a mask made as long"
       for n in (24, 27, 28)},
    "cotenant.policies.partition.search.x_repair__mutmut_4":
        "equivalent: the coverage of no configurations sums to zeros, the else branch's",
    **{f"cotenant.policies.partition.search.x_to_gpus__mutmut_{n}":
       "equivalent: zip(strict=None) or zip() for strict=False" for n in (9, 12)},
    "cotenant.policies.partition.child.xǁPendingǁ__init____mutmut_11":
        "equivalent: the child's pid as None for 0, read only for its truth (a value only in "
        "_stop, reached only with a true pid)",
    **{f"cotenant.policies.partition.child.xǁPendingǁ__init____mutmut_{n}":
       "equivalent: the pipe's fd before the fork is never read: it is read only where the "
       "pid is true, and one statement sets both (short of opcode-level tracing that raises "
       "between the two stores)" for n in (13, 14, 15)},
    **{f"cotenant.policies.partition.child.xǁPendingǁ{name}":
       "equivalent: None for False in a flag read only for its truth"
       for name in ("__init____mutmut_19", "wait__mutmut_6")},
    "cotenant.policies.partition.child.xǁPendingǁwait__mutmut_12":
        "equivalent: break for return at the end of the wait loop, nothing after it",
    **{f"cotenant.policies.partition.child.xǁPendingǁwait__mutmut_{n}":
       "equivalent: a larger read size: a pipe read returns at most what the pipe holds, and "
       "a pipe holds at most 1 MiB unless F_SETPIPE_SZ is used on it, which nothing here does"
       for n in (37, 38)},
}
"""Mutants left out of the score, with the reason: a name ending in its number is one
mutant, any other a prefix (every mutant of a function)."""
