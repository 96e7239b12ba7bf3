"""Each check rule with a log that trips it and one that does not; `hpcbench parse/check` exit codes."""

from __future__ import annotations

import json

from conftest import DATA, write

from hpcbench.parse import parse_file
from hpcbench.parse.checks import Finding, check_parsed

LOGS = DATA / "logs"
TWO_HOSTS_SOCKET = ("na:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
                    "nb:2:1 [0] NCCL INFO comm 0xb rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
                    "na:1:1 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[1000] [send] via NET/Socket/0\n")
IB_LINE = "na:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\n"


def rules(text: str, tmp_path, provenance=None, gpu=None) -> dict[str, Finding]:
    d = parse_file(write(tmp_path / "t.log", text))
    return {f.rule: f for f in check_parsed(d, provenance, gpu=gpu)}


def test_socket_between_nodes_with_ib_visible_is_an_error(tmp_path):
    f = rules(IB_LINE + TWO_HOSTS_SOCKET, tmp_path)["socket-with-ib"]
    assert f.severity == "error" and "NCCL_IB_HCA" in f.fix and f.subject.endswith("t.log")
    assert "socket-with-ib" not in rules(TWO_HOSTS_SOCKET, tmp_path)  # no IB anywhere: sockets are all there is


def test_ib_visible_in_provenance_only(tmp_path):
    prov = [{"schema": "hpcbench.provenance/1", "hostname": "na", "infiniband": {"devices": ["mlx5_0"]}}]
    assert rules(TWO_HOSTS_SOCKET, tmp_path, prov)["socket-with-ib"].severity == "error"
    empty = [{"schema": "hpcbench.provenance/1", "hostname": "na", "infiniband": {"devices": []}}]
    assert "socket-with-ib" not in rules(TWO_HOSTS_SOCKET, tmp_path, empty)


def test_intra_node_socket_is_not_the_error(tmp_path):
    text = IB_LINE + ("na:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 - Init COMPLETE\n"
                      "na:1:2 [1] NCCL INFO comm 0xb rank 1 nranks 2 - Init COMPLETE\n"
                      "na:1:1 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] [send] via NET/Socket/0\n")
    assert "socket-with-ib" not in rules(text, tmp_path)


def test_shm_inside_a_node_is_a_warning(tmp_path):
    assert rules((LOGS / "nccl_shm-socket-mixedchanfmt_32.log").read_text(), tmp_path)["shm-not-p2p"].severity == "warning"
    assert "shm-not-p2p" not in rules((LOGS / "nccl_p2pipcread-busid-hexhost_19.log").read_text(), tmp_path)


def test_ib_without_gdrdma_is_a_note(tmp_path):
    assert rules((LOGS / "nccl_ibring_02.log").read_text(), tmp_path)["ib-without-gdrdma"].severity == "info"
    assert "ib-without-gdrdma" not in rules((LOGS / "nccl_gdrdma-mpiprefix_04.log").read_text(), tmp_path)


def test_warn_lines_are_one_finding_with_the_first_rank_and_host(tmp_path):
    text = "".join(f"[1,{r}]<stdout>:node{r // 4}:{100 + r}:{200 + r} [{r % 4}] include/socket.h:318 NCCL WARN "
                   f"Net : Connect to 10.0.0.{r}<4444> failed : Connection refused\n" for r in (5, 1, 2, 7))
    found = [f for f in check_parsed(parse_file(write(tmp_path / "w.log", text))) if f.rule == "nccl-warn"]
    assert len(found) == 1
    assert "4 times" in found[0].claim and "rank 5" in found[0].claim and "host node1" in found[0].claim
    assert not [f for f in check_parsed(parse_file(LOGS / "nccl_ibring_02.log")) if f.rule == "nccl-warn"]


def test_gpu_job_without_nccl_lines(tmp_path):
    text = "epoch 1 loss 0.3\n"
    assert rules(text, tmp_path, gpu=True)["no-nccl-lines"].severity == "warning"
    assert rules(text, tmp_path, [{"gpus": [{"name": "H100"}]}])["no-nccl-lines"].severity == "warning"
    assert "no-nccl-lines" not in rules(text, tmp_path)  # a CPU job needs no NCCL
    assert "no-nccl-lines" not in rules(IB_LINE, tmp_path, gpu=True)


def test_parse_json_and_table(cli):
    files = [str(LOGS / "nccltests_1.log"), str(LOGS / "horovod_1.log"), str(LOGS / "nccl_ring-p2pipc-4nodes_13.log")]
    out = cli("parse", *files, "--format", "json")
    assert out.returncode == 0, out.stderr
    docs = json.loads(out.stdout)
    assert docs == json.loads(json.dumps([parse_file(f) for f in files]))  # edges are written apart
    assert len(docs[2]["nccl"]["edges"]) > 10
    assert docs[0]["nccl_tests"]["avg_busbw"] == 1.15327 and docs[1]["horovod"]["total_img_sec"] == 4801.4
    table = cli("parse", *files)
    assert table.returncode == 0 and "AWS Libfabric" in table.stdout and "4801.4" in table.stdout
    roce = cli("parse", str(LOGS / "nccl_roce-2193-two-hca_50.log"), str(LOGS / "nccl_ib-plus-roce-mixed-affinity_80.log"))
    head, *rows = roce.stdout.splitlines()
    link = head.split().index("link")
    assert [r.split()[2:link + 1] for r in rows[1:3]] == [["RoCE", "RoCE"], ["IB", "IB+RoCE"]]


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    for verb in ("parse", "check"):
        out = cli(verb, str(LOGS / "ddp_1.log"), str(tmp_path / "missing.log"))
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.strip().splitlines() == [f"error: {tmp_path / 'missing.log'}: no such file (hint: check the path)"]


def test_check_exit_codes(cli, tmp_path):
    bad = write(tmp_path / "bad.log", IB_LINE + TWO_HOSTS_SOCKET)
    out = cli("check", str(bad), str(LOGS / "nccl_ibring_02.log"))
    assert out.returncode == 1 and "error:" in out.stdout and "[socket-with-ib]" in out.stdout
    ok = cli("check", str(LOGS / "nccl_ibring_02.log"), str(LOGS / "nccltests_3.log"))
    assert ok.returncode == 0 and "[ib-without-gdrdma]" in ok.stdout
    prov = write(tmp_path / "provenance-rank0.json", json.dumps({"infiniband": {"devices": ["mlx5_0"]}}))
    via_prov = cli("check", str(write(tmp_path / "s.log", TWO_HOSTS_SOCKET)), "--provenance", str(prov), "--format", "json")
    found = json.loads(via_prov.stdout)
    assert via_prov.returncode == 1 and [f["rule"] for f in found] == ["network", "socket-with-ib"]
    # the verdict line names the network and the IB device that NCCL did not use
    assert found[0]["claim"] == ("2 hosts (host names na, nb); network Socket, from the NET/ transport lines while an IB "
                                 "device is visible in the provenance of a rank (mlx5_0)")
    garbage = write(tmp_path / "g.log", "\x00\x01 nothing here\n")
    g = cli("check", str(garbage), "--gpu")
    assert g.returncode == 0 and "[no-nccl-lines]" in g.stdout and "[unparsable]" in g.stdout
    # a Socket-only log gets its verdict, never a bare "0 errors, 0 warnings, 0 notes"
    sock = cli("check", str(LOGS / "nccl_socket-ring-manynodes_15.log"))
    assert "; network Socket, from the NET/ transport lines (no IB device seen)" in sock.stdout and "1 notes" in sock.stdout


def test_a_roce_verdict_names_its_devices_without_edge_lines():
    """A RoCE log whose inter-node links show only in the selection line still names the NICs it chose."""
    from hpcbench.parse.checks import verdict

    for name in ("nccl_roce-2185-h800_41.log", "nccl_roce-2193-two-hca_50.log"):
        parsed = parse_file(LOGS / name)
        devices = parsed["nccl"]["ib_devices"]
        assert devices and parsed["nccl"]["network"] == "RoCE"
        assert verdict(parsed).startswith(f"2 hosts (host names "), verdict(parsed)
        assert f"; network RoCE, selected ({', '.join(devices[:2])}" in verdict(parsed), verdict(parsed)
