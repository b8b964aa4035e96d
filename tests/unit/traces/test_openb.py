"""Strict openb CSV loading: good rows parse to the right values, every bad row names
file, line, column and the broken rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cotenant.errors import InputError
from cotenant.model.gpu import CATALOG
from cotenant.model.workload import Pod, PodShape, Qos
from cotenant.traces.openb import load_nodes, load_pods

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
GOOD_POD = "p0,1000,2048,1,500,,LS,Running,10,20,10"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
GOOD_NODE = "n0,64000,262144,2,P100"


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are named as given, so the tests give them relative to ``tmp_path``."""
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return Path(name)  # the working directory is tmp_path


def pods_error(tmp_path: Path, *rows: str, header: str = POD_HEADER) -> InputError:
    path = write(tmp_path, "pods.csv", header, *rows)
    with pytest.raises(InputError) as info:
        load_pods(path)
    return info.value


def nodes_error(tmp_path: Path, *rows: str, header: str = NODE_HEADER) -> InputError:
    path = write(tmp_path, "nodes.csv", header, *rows)
    with pytest.raises(InputError) as info:
        load_nodes(path)
    return info.value


# --- valid input ---------------------------------------------------------------------------


def test_valid_pod_list_parses_to_pods(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        "cpu-only,4000,8192,0,0,,BE,Running,0,100,0",
        "frac,6000,12288,1,460,V100M16|V100M32,LS,Running,5,,5",
        "whole,12000,16384,2,1000,T4,burstable,Running,7,7,7",
        "",  # blank lines are skipped, not errors
        "guar,1000,1024,1,1000,,Guaranteed,Running,8,9,8",
    )
    pods = load_pods(path)
    assert pods == [
        Pod("cpu-only", PodShape(4000, 8192, 0, 0, ()), Qos.BE, 0, 100),
        Pod("frac", PodShape(6000, 12288, 1, 460, ("V100-16GB", "V100-32GB")), Qos.LS, 5, None),
        Pod("whole", PodShape(12000, 16384, 2, 1000, ("T4",)), Qos.BURSTABLE, 7, 7),
        Pod("guar", PodShape(1000, 1024, 1, 1000, ()), Qos.GUARANTEED, 8, 9),
    ]
    assert pods[1].shape.fractional
    assert pods[1].duration is None
    assert not pods[2].shape.fractional
    assert pods[2].shape.gpu_milli_total == 2000


def test_gpu_spec_aliases_are_canonical_sorted_and_deduplicated(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        "a,1000,1024,1,1000,V100M32|V100M16|V100-32GB,LS,Running,0,1,0",
    )
    (only,) = load_pods(path)
    assert only.shape.gpu_spec == ("V100-16GB", "V100-32GB")


def test_multigpu_format_defaults_optional_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "multi.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
        "a,12000,16384,1,1000",
        "b,6000,12288,1,460",
        "c,32000,65536,8,1000",
    )
    pods = load_pods(path)
    assert [p.shape for p in pods] == [
        PodShape(12000, 16384, 1, 1000),
        PodShape(6000, 12288, 1, 460),
        PodShape(32000, 65536, 8, 1000),
    ]
    assert all(p.qos is Qos.LS for p in pods)
    assert all(p.creation_time == 0 for p in pods)
    assert all(p.deletion_time is None for p in pods)
    assert all(p.shape.gpu_spec == () for p in pods)


def test_integral_float_text_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER, "a,1000.0,2048,1,500.0,,LS,Running,0,1,0")
    (only,) = load_pods(path)
    assert (only.shape.cpu_milli, only.shape.gpu_milli) == (1000, 500)


def test_nodes_parse_and_cpu_only_nodes_skipped_by_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nodes.csv",
        NODE_HEADER,
        "n0,64000,262144,2,P100",
        "n1,32000,262144,0,",
        "n2,96000,393216,8,V100M32",
    )
    nodes = load_nodes(path)
    assert [n.name for n in nodes] == ["n0", "n2"]
    assert nodes[0].gpu_model is CATALOG.get("P100")
    assert (nodes[0].cpu_milli, nodes[0].memory_mib, nodes[0].gpu_count) == (64000, 262144, 2)
    assert nodes[1].gpu_model is not None
    assert nodes[1].gpu_model.name == "V100-32GB"
    assert nodes[1].gpu_count == 8

    every = load_nodes(path, gpu_only=False)
    assert [n.name for n in every] == ["n0", "n1", "n2"]
    assert every[1].gpu_count == 0
    assert every[1].gpu_model is None


# --- bad pod rows ----------------------------------------------------------------------------


def test_malformed_row_names_file_line_and_field_counts(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "p1,1000,2048,1")
    assert err.where == "pods.csv:3"
    assert "malformed row" in err.rule
    assert "4 fields" in err.rule
    assert "11" in err.rule
    assert str(err).startswith("pods.csv:3: malformed row")


def test_non_integer_value(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "p1,lots,2048,1,500,,LS,Running,0,1,0")
    assert err.where == "pods.csv:3:cpu_milli"
    assert "'lots' is not an integer" in err.rule


@pytest.mark.parametrize(
    ("cpu", "rule"),
    [
        ("1_000", "'1_000' is not an integer"),
        ("\uff11\uff10\uff10\uff10", "is not an integer"),  # full-width digits
        ("\u00b2", "is not an integer"),
        ("1e30", "1e30 is out of range (0..1000000000000)"),
        ("99999999999999999999", "out of range (0..1000000000000)"),
        ("9" * 400, "out of range"),
    ],
)
def test_integers_are_ascii_and_bounded(tmp_path: Path, cpu: str, rule: str) -> None:
    err = pods_error(tmp_path, GOOD_POD, f"p1,{cpu},2048,1,500,,LS,Running,0,1,0")
    assert err.where == "pods.csv:3:cpu_milli"
    assert rule in err.rule


def test_fractional_non_integer_is_rejected(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,1,500.5,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:gpu_milli"
    assert "not an integer" in err.rule


def test_negative_cpu_milli(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,-1,2048,0,0,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:cpu_milli"
    assert "-1 is out of range (0..1000000000000)" in err.rule


@pytest.mark.parametrize("milli", [-1, 1200])
def test_gpu_milli_out_of_range(tmp_path: Path, milli: int) -> None:
    err = pods_error(tmp_path, GOOD_POD, f"p1,1000,2048,1,{milli},,LS,Running,0,1,0")
    assert err.where == "pods.csv:3:gpu_milli"
    assert f"{milli} is out of range (0..1000)" in err.rule


def test_gpu_milli_without_gpus(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,0,500,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:gpu_milli"
    assert "500 with num_gpu 0" in err.rule
    assert "must be 0" in err.rule


def test_gpus_without_gpu_milli(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,1,0,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:gpu_milli"
    assert "num_gpu >= 1" in err.rule


def test_multi_gpu_pod_with_fractional_milli(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,2,500,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:gpu_milli"
    assert "500 with num_gpu 2" in err.rule
    assert "whole GPUs (1000)" in err.rule


def test_unknown_gpu_model_in_gpu_spec(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "p1,1000,2048,1,500,V100M16|X900,LS,Running,0,1,0")
    assert err.where == "pods.csv:3:gpu_spec"
    assert "unknown GPU model 'X900'" in err.rule
    assert "V100-16GB" in err.rule  # lists the known models


def test_missing_column(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,1", header="name,cpu_milli,memory_mib,num_gpu")
    assert err.where == "pods.csv:1"
    assert "missing column gpu_milli" in err.rule


def test_a_utf8_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = Path("pods.csv")  # in tmp_path, the working directory
    path.write_bytes(("\ufeff" + POD_HEADER + "\n" + GOOD_POD + "\n").encode("utf-8"))
    assert [p.name for p in load_pods(path)] == ["p0"]


def test_a_byte_that_is_not_utf8_is_named_at_its_line(tmp_path: Path) -> None:
    path = Path("pods.csv")  # in tmp_path, the working directory
    rows = [POD_HEADER, *(GOOD_POD.replace("p0", f"p{i}") for i in range(2000))]
    text = "\n".join(rows).encode("utf-8") + b"\npX\xff,1000,2048,1,500,,LS,Running,0,1,0\n"
    path.write_bytes(text)  # the bad byte lies past the first read buffer
    with pytest.raises(InputError) as info:
        load_pods(path)
    assert info.value.where == "pods.csv:2002"
    assert info.value.rule == "not UTF-8 text (byte 3 of the line)"


def test_an_unclosed_quote_is_named_where_its_row_starts(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, 'p1,"1000,2048,1,500,,LS,Running,0,1,0', GOOD_POD)
    assert err.where == "pods.csv:3"
    assert "malformed CSV row" in err.rule


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_crlf_and_cr_line_endings_keep_line_numbers(tmp_path: Path, ending: str) -> None:
    path = Path("pods.csv")  # in tmp_path, the working directory
    bad = "p2,lots,2048,1,500,,LS,Running,0,1,0"
    path.write_bytes(ending.join([POD_HEADER, GOOD_POD, GOOD_POD.replace("p0", "p1"), bad, ""])
                     .encode("utf-8"))
    with pytest.raises(InputError) as info:
        load_pods(path)
    assert info.value.where == "pods.csv:4:cpu_milli"
    path.write_bytes(ending.join([POD_HEADER, GOOD_POD, ""]).encode("utf-8"))
    assert [p.name for p in load_pods(path)] == ["p0"]


def test_a_column_twice_in_the_header(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD + ",1", header=POD_HEADER + ",qos")
    assert err.where == "pods.csv:1"
    assert err.rule == "column 'qos' appears twice in the header"


def test_a_named_pipe_is_refused_rather_than_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pods.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a pipe or socket, not a file"):
        load_pods(fifo)


def test_empty_file(tmp_path: Path) -> None:
    path = Path("pods.csv")  # in tmp_path, the working directory
    path.write_bytes(b"")
    with pytest.raises(InputError) as info:
        load_pods(path)
    assert info.value.where == "pods.csv:1"
    assert "file is empty" in info.value.rule


def test_header_only_file(tmp_path: Path) -> None:
    err = pods_error(tmp_path)
    assert err.where == "pods.csv:2"
    assert "no data rows" in err.rule


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_pods(tmp_path / "absent.csv")


def test_duplicate_pod_names(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "p1,1,1,0,0,,LS,Running,0,1,0", GOOD_POD)
    assert err.where == "pods.csv:4:name"
    assert "'p0' appears twice" in err.rule


def test_empty_pod_name(tmp_path: Path) -> None:
    err = pods_error(tmp_path, ",1000,2048,0,0,,LS,Running,0,1,0")
    assert err.where == "pods.csv:2:name"
    assert "empty" in err.rule


def test_an_empty_creation_time_is_refused_where_the_column_exists(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "p1,1000,2048,1,500,,LS,Running,,20,10")
    assert err.where == "pods.csv:3:creation_time"
    assert "every pod needs its creation time" in err.rule


def test_deletion_before_creation(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,1,500,,LS,Running,100,99,100")
    assert err.where == "pods.csv:2:deletion_time"
    assert "99 is before creation_time 100" in err.rule


def test_unknown_qos(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,1000,2048,1,500,,Premium,Running,0,1,0")
    assert err.where == "pods.csv:2:qos"
    assert "'Premium' is not one of" in err.rule
    assert "LS" in err.rule
    assert "BE" in err.rule


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    err = pods_error(tmp_path, GOOD_POD, "", "", "p1,x,2048,1,500,,LS,Running,0,1,0")
    assert err.where == "pods.csv:5:cpu_milli"


def test_error_stops_streaming_at_first_bad_row(tmp_path: Path) -> None:
    """Nothing is dropped silently: a bad row in the middle fails the whole load."""
    err = pods_error(
        tmp_path, GOOD_POD, "p1,1000,2048,0,1,,LS,Running,0,1,0", "p2,1,1,0,0,,LS,Running,0,1,0"
    )
    assert err.where == "pods.csv:3:gpu_milli"


# --- bad node rows ---------------------------------------------------------------------------


def test_unknown_gpu_model_in_node_list(tmp_path: Path) -> None:
    err = nodes_error(tmp_path, GOOD_NODE, "n1,64000,262144,4,X900")
    assert err.where == "nodes.csv:3:model"
    assert "unknown GPU model 'X900'" in err.rule
    assert "P100" in err.rule


def test_gpu_node_without_model(tmp_path: Path) -> None:
    err = nodes_error(tmp_path, "n1,64000,262144,4,")
    assert err.where == "nodes.csv:2:model"
    assert "4 GPUs" in err.rule


def test_repeated_node_name(tmp_path: Path) -> None:
    err = nodes_error(tmp_path, GOOD_NODE, GOOD_NODE)
    assert err.where == "nodes.csv:3:sn"
    assert "repeated" in err.rule


def test_node_list_missing_column(tmp_path: Path) -> None:
    err = nodes_error(tmp_path, "n0,64000,262144,2", header="sn,cpu_milli,memory_mib,gpu")
    assert err.where == "nodes.csv:1"
    assert "missing column model" in err.rule


def test_node_negative_memory(tmp_path: Path) -> None:
    err = nodes_error(tmp_path, "n0,64000,-5,2,P100")
    assert err.where == "nodes.csv:2:memory_mib"
    assert "out of range" in err.rule


def test_node_list_empty_and_header_only(tmp_path: Path) -> None:
    empty = Path("empty.csv")  # in tmp_path, the working directory
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"^empty\.csv:1: file is empty"):
        load_nodes(empty)
    with pytest.raises(InputError, match=r"^nodes\.csv:2: no data rows"):
        load_nodes(write(tmp_path, "nodes.csv", NODE_HEADER))


def test_one_line_carries_hint(tmp_path: Path) -> None:
    err = pods_error(tmp_path, "p1,abc,2048,0,0,,LS,Running,0,1,0")
    assert err.one_line() == "pods.csv:2:cpu_milli: 'abc' is not an integer (hint: e.g. 1000)"


# --- the real trace ----------------------------------------------------------------------------


@pytest.mark.shared_data
def test_real_openb_default_trace_loads(openb_dir: Path) -> None:
    pods = load_pods(openb_dir / "openb_pod_list_default.csv")
    nodes = load_nodes(openb_dir / "openb_node_list_gpu_node.csv")
    assert len(pods) == 8152
    assert len(nodes) == 1213
    assert sum(n.gpu_count for n in nodes) == 6212
    assert all(n.gpu_model is not None for n in nodes)


@pytest.mark.shared_data
def test_every_openb_pod_list_variant_loads(openb_dir: Path) -> None:
    variants = sorted(openb_dir.glob("openb_pod_list_*.csv"))
    assert len(variants) >= 2
    for path in variants:
        pods = load_pods(path)
        assert pods, path.name
        assert len({p.name for p in pods}) == len(pods), path.name


@pytest.mark.shared_data
def test_all_node_list_keeps_cpu_nodes_only_on_request(openb_dir: Path) -> None:
    path = openb_dir / "openb_node_list_all_node.csv"
    if not path.exists():
        pytest.skip("openb_node_list_all_node.csv is absent")
    gpu_nodes = load_nodes(path)
    every = load_nodes(path, gpu_only=False)
    assert len(gpu_nodes) == 1213
    assert len(every) > len(gpu_nodes)
    assert sum(1 for n in every if n.gpu_count == 0) == len(every) - len(gpu_nodes)
