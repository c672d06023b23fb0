from offers import offer

from tfmesos.placement import OfferPool, TaskRequest, largest_offer, place


def amounts(resources, name):
    return sum(r["scalar"]["value"] for r in resources if r["name"] == name and "scalar" in r)


def ports_of(resources):
    return [r["ranges"]["range"] for r in resources if r["name"] == "ports"]


def test_packs_several_tasks_into_one_offer_with_distinct_ports():
    requests = [TaskRequest(i, cpus=1, mem=1024) for i in range(3)]
    result = place(requests, [offer("o1", cpus=4, mem=8192)])
    assigned = result.launches["o1"]
    assert len(assigned) == 3 and not result.unplaced and result.unused == []
    assert sorted(a.port for a in assigned) == [31000, 31001, 31002]
    for a in assigned:
        assert amounts(a.resources, "cpus") == 1 and amounts(a.resources, "mem") == 1024
        assert ports_of(a.resources) == [[{"begin": a.port, "end": a.port}]]
        assert all(r["allocation_info"] == {"role": "*"} for r in a.resources)


def test_spreads_over_offers_when_one_is_full():
    requests = [TaskRequest(i, cpus=2, mem=1024) for i in range(3)]
    result = place(requests, [offer("o1", cpus=2), offer("o2", cpus=4), offer("o3", cpus=1)])
    placed = {oid: len(a) for oid, a in result.launches.items()}
    assert placed == {"o1": 1, "o2": 2}
    assert result.unused == ["o3"]


def test_unplaceable_request_is_reported():
    result = place([TaskRequest("big", cpus=8, mem=1)], [offer("o1", cpus=4)])
    assert [r.key for r in result.unplaced] == ["big"] and result.unused == ["o1"]


def test_no_ports_in_offer_means_task_picks_its_own():
    result = place([TaskRequest("t", 1, 1)], [offer("o1", ports=())])
    assert result.launches["o1"][0].port is None


def test_port_ranges_are_consumed_across_ranges():
    pool = OfferPool(offer("o1", ports=((5000, 5000), (6000, 6001))))
    got = [pool.take(TaskRequest(i, 0.1, 1))[1] for i in range(3)]
    assert got == [5000, 6000, 6001]
    assert not pool.has_ports()


def test_scalar_gpus():
    result = place([TaskRequest("g", 1, 1, gpus=2)], [offer("o1", gpus=4)])
    a = result.launches["o1"][0]
    assert amounts(a.resources, "gpus") == 2 and a.gpu_ids == []


def test_set_gpus_assign_ids():
    result = place([TaskRequest("a", 1, 1, gpus=1), TaskRequest("b", 1, 1, gpus=2)],
                   [offer("o1", gpu_set=["0", "1", "2", "10"])])
    ids = sorted(tuple(a.gpu_ids) for a in result.launches["o1"])
    assert ids == [("0", "1"), ("2",)]
    sets = [r["set"]["item"] for a in result.launches["o1"] for r in a.resources if r["name"] == "gpus"]
    assert sorted(map(tuple, sets)) == ids


def test_cpu_tasks_avoid_gpu_agents_when_they_can():
    result = place([TaskRequest("cpu", 1, 1), TaskRequest("gpu", 1, 1, gpus=1)],
                   [offer("gpu-agent", gpus=1), offer("plain")])
    where = {a.request.key: oid for oid, assigned in result.launches.items() for a in assigned}
    assert where == {"cpu": "plain", "gpu": "gpu-agent"}


def test_cpu_tasks_use_gpu_agents_when_nothing_else_fits():
    result = place([TaskRequest("cpu", 1, 1)], [offer("gpu-agent", gpus=1)])
    assert "gpu-agent" in result.launches


def test_gpu_request_never_lands_without_gpus():
    result = place([TaskRequest("gpu", 1, 1, gpus=1)], [offer("plain")])
    assert result.unplaced and not result.launches


def test_reserved_role_is_kept_on_task_resources():
    result = place([TaskRequest("t", 1, 1)], [offer("o1", role="ml")])
    assert {r["allocation_info"]["role"] for r in result.launches["o1"][0].resources} == {"ml"}


def test_largest_offer_summary():
    assert largest_offer([offer("a", cpus=1, hostname="h1"), offer("b", cpus=3, hostname="h2")]) \
        == {"cpus": 3, "mem": 8192, "gpus": 0, "agent": "h2"}
    assert largest_offer([]) is None
