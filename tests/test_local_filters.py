"""Offer filters as Mesos keeps them (src/master/allocator/mesos/hierarchical.cpp):
each DECLINE or ACCEPT leaves its own filter on the (framework, agent) for its
own ``refuse_seconds``; a later, shorter one does not end an earlier one."""

import pytest
from fixtures_master import clients, make_local_master, small_agent
from mesos_http_client import task_info


@pytest.mark.waits
def test_a_short_filter_does_not_end_a_longer_one(make_local_master, clients):
    master = make_local_master(agents=[small_agent(cpus=4, mem=1024)])
    client = clients(master)
    offer = client.next_offers()[0]
    client.launch(offer, [task_info("first", offer, "sleep 600", cpus=1, mem=32)],
                  filters={"refuse_seconds": 0})
    client.wait_state("first", "TASK_RUNNING")
    rest = client.next_offers()[0]              # what "first" left: refused for a minute
    client.decline([rest], refuse_seconds=60)
    client.kill("first")
    client.wait_state("first", "TASK_KILLED")
    offer = client.next_offers()[0]             # more than the filter covers
    client.launch(offer, [task_info("second", offer, "sleep 600", cpus=1, mem=32)],
                  filters={"refuse_seconds": 1})
    client.wait_state("second", "TASK_RUNNING")
    # The unused part is the declined one again, now under both filters: the
    # 1 s one ends, the 60 s one still holds it back.
    client.no_event(["OFFERS"], 3)
    client.call("REVIVE")                       # clears every filter
    revived = client.next_offers()[0]
    assert {r["name"] for r in revived["resources"]} >= {"cpus", "mem"}
    client.kill("second")
    client.wait_state("second", "TASK_KILLED")


def test_filters_of_one_framework_leave_another_alone(make_local_master, clients):
    master = make_local_master()
    first = clients(master, name="first")
    offers = first.next_offers()               # the agent's one offer: first holds it
    second = clients(master, name="second")
    first.decline(offers, refuse_seconds=600)
    assert second.next_offers(timeout=10)
    first.no_event(["OFFERS"], 1)


def test_a_multi_role_frameworks_role_it_declined_leaves_its_other_roles_their_offers(
        make_local_master, clients):
    # Only its first role was ever offered anything: declined there for 600 s,
    # the resources were not offered to its role 'b' either. Mesos' allocator
    # offers to a framework in each of its roles, its filters per role.
    master = make_local_master()
    client = clients(master, capabilities=["MULTI_ROLE"], roles=["a", "b"])
    offers = client.next_offers()
    assert [offer["allocation_info"]["role"] for offer in offers] == ["a"]
    client.decline(offers, refuse_seconds=600)
    again = client.next_offers(timeout=10)
    assert [offer["allocation_info"]["role"] for offer in again] == ["b"]
