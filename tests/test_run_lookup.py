"""Which framework is the caller's run (``cli.run_lookup``), decided from a
master's ``/master/state`` alone (pure): only a framework provably the
caller's, never the first of several. Look-alikes carry the run's labels
(its proof label too, copied), under another user, another principal, or
the caller's own user on a master that authenticates nobody."""

import getpass
import json
import os

import pytest
from local_users import nobody

from tfmesos.cli.run_lookup import (
    AmbiguousRun,
    Caller,
    RunNotFound,
    by_framework,
    candidates,
    decide,
    find_run,
    keys_of,
    local_record,
)
from tfmesos.core.identity import RunIdentity
from tfmesos.record.takeover_files import FAILOVER_FILE, TakeoverError

RUN = "cafe0123"
KEY, OTHER_KEY = b"k" * 32, b"o" * 32
ME = Caller("alice")
MASTER = "127.0.0.1:5050"


def framework(framework_id, run_id=RUN, user="alice", principal=None, proof=None, key=KEY,
              registered=100.0, detached=False, connected=True, signed_principal=None):
    """A framework of the state JSON; ``proof``: "own" (signed with ``key``
    for this framework), a copied label (a string), or None."""
    labels = {"tfmesos.run_id": run_id}
    if proof == "own":
        labels["tfmesos.proof"] = RunIdentity(
            run_id=run_id, key=key, user=user, framework_id=framework_id,
            principal=signed_principal or principal).framework_proof()
    elif proof is not None:
        labels["tfmesos.proof"] = proof
    if detached:
        labels["tfmesos.detached"] = "1"
    found = {"id": framework_id, "name": "train", "user": user, "connected": connected,
             "registered_time": registered, "tasks": [],
             "labels": [{"key": k, "value": v} for k, v in labels.items()]}
    if principal is not None:
        found["principal"] = principal
    return found


def state(*frameworks, completed=()):
    return {"frameworks": list(frameworks), "completed_frameworks": list(completed)}


def keys(table=None):
    table = {RUN: KEY} if table is None else table
    return table.get


def no_keys(run_id):
    return None


def proof_of(found, framework_id):
    [value] = [label["value"] for f in found["frameworks"] if f["id"] == framework_id
               for label in f["labels"] if label["key"] == "tfmesos.proof"]
    return value


def victim_and(*lookalikes):
    victim = framework("F-victim", proof="own", registered=100.0)
    return state(victim, *lookalikes)


# -- one candidate: it ------------------------------------------------------------------


def test_the_callers_one_run_is_found_by_a_prefix_of_its_id_or_its_framework_id():
    found = victim_and()
    assert decide(found, RUN[:4], ME, no_keys, MASTER).run.framework_id == "F-victim"
    assert decide(found, "F-victim", ME, no_keys, MASTER).run.run_id == RUN
    chosen = decide(found, RUN, ME, keys(), MASTER)
    assert chosen.proven is True and chosen.user == "alice" and chosen.principal is None


def test_a_lookalike_of_another_user_is_not_the_callers():
    # Another local user on a master without credentials: its framework names its user.
    found = victim_and(framework("F-evil", user="nobody", registered=200.0))
    for held in (no_keys, keys()):
        assert decide(found, RUN, ME, held, MASTER).run.framework_id == "F-victim"


def test_a_lookalike_of_another_principal_is_not_the_callers():
    # A --credentials master: the principal is the authenticated one's.
    victim = framework("F-victim", principal="alice", proof="own")
    evil = framework("F-evil", principal="mallory", registered=200.0,
                     proof=proof_of(state(victim), "F-victim"))
    me = Caller("alice", "alice")
    for held in (no_keys, keys()):
        assert decide(state(victim, evil), RUN, me, held, MASTER).run.framework_id == "F-victim"


def test_with_the_key_a_lookalike_with_the_callers_user_and_a_copied_proof_is_not_taken():
    # Who subscribes chooses the user (and, unauthenticated, the principal);
    # the proof label signs the framework's own id: copied, it does not verify.
    victim = victim_and()
    evil = framework("F-evil", registered=200.0, detached=True,
                     proof=proof_of(victim, "F-victim"))
    forged = framework("F-forged", registered=300.0, proof="own", key=OTHER_KEY)
    found = state(*victim["frameworks"], evil, forged)
    chosen = decide(found, RUN, ME, keys(), MASTER)
    assert chosen.run.framework_id == "F-victim"
    assert [c.proven for c in candidates(found, ME, keys())] == [False, False, True]


def test_a_run_proven_by_the_key_is_the_callers_whatever_user_it_runs_as():
    # tfrun -u nobody: the framework names the tasks' user; the key proves it.
    found = state(framework("F-mine", user="nobody", proof="own"))
    assert decide(found, RUN, ME, keys(), MASTER).run.framework_id == "F-mine"
    with pytest.raises(RunNotFound, match="no run %s of yours" % RUN):
        decide(found, RUN, ME, no_keys, MASTER)


def test_on_a_master_that_authenticates_nobody_the_callers_principal_is_not_asked_for():
    # MESOS_PRINCIPAL set, the master records none: the run signed with the
    # principal it sent.
    found = state(framework("F-mine", proof="own", signed_principal="alice"))
    me = Caller("alice", "alice")
    chosen = decide(found, RUN, me, keys(), MASTER)
    assert chosen.run.framework_id == "F-mine" and chosen.proven is True


# -- none: why -------------------------------------------------------------------------------


def test_no_framework_with_that_id_at_all():
    with pytest.raises(RunNotFound, match="^the master at %s knows no tfmesos run 'beef': "
                                          "`tfmesos runs --master %s` lists" % (MASTER, MASTER)):
        decide(victim_and(), "beef", ME, no_keys, MASTER)


def test_only_anothers_frameworks_is_one_line_naming_the_caller_and_the_listing():
    found = state(framework("F-evil", user="nobody"),
                  framework("F-other", user="alice", principal="mallory"))
    with pytest.raises(RunNotFound) as error:
        decide(found, RUN, Caller("alice", "alice"), keys(), MASTER)
    text = str(error.value)
    assert "\n" not in text
    assert text.startswith("no run %s of yours (user alice, principal alice) on %s"
                           % (RUN, MASTER))
    assert "F-evil (run %s, user nobody, principal none" % RUN in text
    assert "F-other (run %s, user alice, principal mallory" % RUN in text
    # Before: "`tfmesos runs --master M` lists the master's runs", which lists
    # this very run: no help in being refused it.
    assert text.endswith("; tfmesos acts only on a run of yours: give this command with the "
                         "MESOS_PRINCIPAL that started it, as its user or holding the run's key "
                         "(~/.tfmesos/keys/RUN, or $TFMESOS_KEYS_DIR)"), text
    assert "tfmesos runs" not in text


def test_with_the_key_and_no_framework_it_proves_nothing_is_chosen():
    evil = framework("F-evil", proof="forged", registered=200.0)
    with pytest.raises(RunNotFound, match="shows the proof of the run's key: F-evil carries"):
        decide(state(evil), RUN, ME, keys(), MASTER)


def test_a_detached_run_needs_the_key_when_it_is_handed_to_the_run():
    found = state(framework("F-mine", proof="own", detached=True))

    def detached(run):
        return run.detached
    with pytest.raises(RunNotFound, match="^run %s needs its key .*--key FILE" % RUN):
        decide(found, RUN, ME, no_keys, MASTER, needs_proof=detached)
    assert decide(found, RUN, ME, keys(), MASTER, needs_proof=detached).proven is True
    # An explicit key (--key FILE) proves only its own run.
    with pytest.raises(RunNotFound, match="proof"):
        decide(found, RUN, ME, keys({RUN: OTHER_KEY}), MASTER, needs_proof=detached)


# -- two or more: all listed, none taken ---------------------------------------------------


def test_two_genuine_runs_of_the_caller_with_one_prefix_are_listed_never_the_first():
    found = state(framework("F-1", run_id="abcd0001", registered=100.0),
                  framework("F-2", run_id="abcd0002", registered=200.0))
    with pytest.raises(AmbiguousRun) as error:
        decide(found, "abcd", ME, no_keys, MASTER)
    assert error.value.exit_code == 2
    text = str(error.value)
    assert "\n" not in text and text.startswith("'abcd' names 2 runs of yours: ")
    assert "F-2 (run abcd0002, user alice, principal none, started " in text
    assert "F-1 (run abcd0001, user alice, principal none, started " in text
    assert decide(found, "abcd0001", ME, no_keys, MASTER).run.framework_id == "F-1"


def test_without_the_key_a_lookalike_with_the_callers_user_makes_two_candidates():
    found = victim_and(framework("F-evil", registered=200.0, proof="copied"))
    with pytest.raises(AmbiguousRun, match="F-evil .*F-victim"):
        decide(found, RUN, ME, no_keys, MASTER)


def test_live_only_leaves_finished_runs_out():
    old = framework("F-old", registered=50.0, proof="own")
    live = framework("F-live", registered=150.0, proof="own")
    assert decide(state(live, completed=[old]), RUN, ME, keys(), MASTER,
                  live_only=True).run.framework_id == "F-live"
    with pytest.raises(AmbiguousRun):
        decide(state(live, completed=[old]), RUN, ME, keys(), MASTER)
    with pytest.raises(RunNotFound, match="has finished already .framework F-old"):
        decide(state(completed=[old]), RUN, ME, keys(), MASTER, live_only=True)


# -- by the local record's framework id ------------------------------------------------------


def test_a_record_of_the_callers_own_is_no_proof_that_another_users_or_principals_run_is_theirs():
    # Another local user (or principal) copied a run.json into their own
    # runs directory, naming the victim's run and framework ids (both on
    # /master/state): tfmesos kill then killed the victim's run and
    # relabelled it "killed (by nobody)" (found by a review helper).
    theirs = state(framework("F-victim", user="alice"))
    with pytest.raises(RunNotFound, match="framework F-victim on %s is run %s's of user alice, "
                       "principal none, not yours .user mallory, principal none." % (MASTER, RUN)):
        by_framework(theirs, "F-victim", RUN, Caller("mallory"), no_keys, MASTER, "here")
    other_principal = state(framework("F-victim", user="alice", principal="alice"))
    with pytest.raises(RunNotFound, match="principal alice, not yours .user alice, principal bob."):
        by_framework(other_principal, "F-victim", RUN, Caller("alice", "bob"), no_keys, MASTER,
                     "here")
    # The caller's own; or another user's that the caller's key proves (tfrun -u).
    assert by_framework(other_principal, "F-victim", RUN, Caller("alice", "alice"), no_keys,
                        MASTER, "here").run.framework_id == "F-victim"
    proven = state(framework("F-victim", user="bob", proof="own"))
    assert by_framework(proven, "F-victim", RUN, ME, keys(), MASTER, "here").proven is True



def test_a_local_record_names_its_framework_by_id_only():
    found = victim_and(framework("F-evil", registered=200.0, proof="copied"))
    assert by_framework(found, "F-victim", RUN, ME, no_keys, MASTER, "here").run.framework_id \
        == "F-victim"
    assert by_framework(found, "F-victim", RUN, ME, keys(), MASTER, "here").proven is True
    # A framework that took the recorded id on another master is not the run's.
    with pytest.raises(RunNotFound, match="carries run %s's id but not the proof" % RUN):
        by_framework(found, "F-evil", RUN, ME, keys(), MASTER, "here")
    with pytest.raises(RunNotFound, match="carries run id %s, not run beef0000's" % RUN):
        by_framework(found, "F-victim", "beef0000", ME, keys(), MASTER, "here")
    with pytest.raises(RunNotFound, match="does not know run %s's framework F-gone" % RUN) \
            as caught:
        by_framework(found, "F-gone", RUN, ME, keys(), MASTER, "here")
    # Not "its tasks are gone": a task that lost its framework (a master
    # restarted from nothing, as tfmesos local-master is) runs on 10 minutes
    # (found by a review helper).
    assert str(caught.value).endswith(
        ": the run ended, or is on another master; should its tasks still run (a master "
        "restarted without its state, as tfmesos local-master is), each stops by itself "
        "within 10 minutes of losing its framework")


def write_record(directory, run_id, framework_id, master="127.0.0.1:5050"):
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({
        "schema_version": 5, "run_id": run_id, "master": master,
        "framework_id": framework_id}))
    return directory


def test_a_local_record_counts_only_when_it_is_the_callers_and_names_a_framework(tmp_path):
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    write_record(tmp_path / "mine", RUN, "F-victim")
    record = local_record(RUN[:4], env)
    assert (record.run_id, record.framework_id) == (RUN, "F-victim")
    assert local_record(str(tmp_path / "mine"), env).framework_id == "F-victim"
    write_record(tmp_path / "embedded", "dead0001", "F-x", master="local")
    write_record(tmp_path / "early", "dead0002", None)
    assert local_record("dead0001", env) is None and local_record("dead0002", env) is None
    assert local_record("beef", env) is None


def test_a_record_another_user_owns_is_no_record_of_the_callers(tmp_path):
    other = nobody_or_skip()
    planted = write_record(tmp_path / "planted", RUN, "F-evil")
    os.chown(planted / "run.json", other.pw_uid, other.pw_gid)
    assert local_record(RUN, {"TFMESOS_RUNS_DIR": str(tmp_path)}) is None


def test_a_lookalike_record_another_user_planted_does_not_hide_the_callers(tmp_path):
    # Two records matched the run id: local_record gave up (None), and
    # tfmesos attach RUN said "which master?" or "started in the foreground
    # elsewhere" of the caller's own --failover run.
    other = nobody_or_skip()
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    failover_json(write_record(tmp_path / ("mine-%s" % RUN), RUN, "F-victim"), "F-victim")
    planted = write_record(tmp_path / ("aaa-%s" % RUN), RUN, "F-evil")
    for path in (planted, planted / "run.json"):
        os.chown(path, other.pw_uid, other.pw_gid)
    record = local_record(RUN, env)
    assert record is not None and record.failover.framework_id == "F-victim"


def nobody_or_skip():
    return nobody("giving a file to another user needs root")


def failover_json(directory, framework_id, master="127.0.0.1:5050"):
    """A failover.json as tfrun writes it (0600), naming ``framework_id``."""
    path = directory / FAILOVER_FILE
    path.write_text(json.dumps({
        "format": 2, "identity": {"run_id": RUN, "framework_id": framework_id, "user": "alice"},
        "spec": {"master": master}, "packed": {}, "workdir": "/w"}))
    path.chmod(0o600)
    return path


def test_a_record_through_a_link_or_that_others_may_write_is_no_record(tmp_path):
    env = {"TFMESOS_RUNS_DIR": str(tmp_path / "runs")}
    mine = write_record(tmp_path / "mine", RUN, "F-victim")
    failover_json(mine, "F-victim")
    assert local_record(str(mine), env).failover.framework_id == "F-victim"
    # Another's directory whose run.json links to the caller's own record.
    planted = tmp_path / "runs" / ("x-%s" % RUN)
    planted.mkdir(parents=True)
    (planted / "run.json").symlink_to(mine / "run.json")
    failover_json(planted, "F-attacker", master="evil.example:5050")
    assert local_record(RUN, env) is None
    (planted / "run.json").unlink()
    (planted / "run.json").write_text((mine / "run.json").read_text())
    assert local_record(RUN, env).failover.master == "evil.example:5050"   # the control
    planted.chmod(0o777)             # a directory anyone may change
    assert local_record(RUN, env) is None
    planted.chmod(0o755)
    (planted / FAILOVER_FILE).unlink()
    (planted / FAILOVER_FILE).symlink_to(mine / FAILOVER_FILE)
    assert local_record(RUN, env) is None


def test_a_record_a_group_with_other_members_may_write_is_no_record(tmp_path):
    # Only "writable by all" was refused: a run directory, run.json or
    # failover.json of the caller's that a group with other members may
    # write (umask 002, a shared group) was acted on, as run_dirs refuses.
    other = nobody_or_skip()          # a member of its own primary group
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    mine = write_record(tmp_path / ("x-%s" % RUN), RUN, "F-victim")
    failover = failover_json(mine, "F-victim")
    for path in (mine, mine / "run.json", failover):
        os.chown(path, os.geteuid(), other.pw_gid)
    assert local_record(RUN, env).failover.framework_id == "F-victim"   # the control
    for path, mode, back in ((mine, 0o770, 0o750), (mine / "run.json", 0o660, 0o640),
                             (failover, 0o620, 0o600)):
        path.chmod(mode)
        assert local_record(RUN, env) is None, path
        path.chmod(back)
    assert local_record(RUN, env).failover.framework_id == "F-victim"


def test_a_failover_file_of_another_user_makes_the_record_none_of_the_callers(tmp_path):
    nobody = nobody_or_skip()
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    mine = write_record(tmp_path / ("x-%s" % RUN), RUN, "F-victim")
    os.chown(failover_json(mine, "F-attacker", master="evil.example:5050"), nobody.pw_uid,
             nobody.pw_gid)
    assert local_record(RUN, env) is None


def test_an_unreadable_failover_file_is_said_when_the_run_is_taken_over(tmp_path):
    mine = write_record(tmp_path / "mine", RUN, "F-victim")
    (mine / FAILOVER_FILE).write_text("{not json")
    (mine / FAILOVER_FILE).chmod(0o600)
    record = local_record(str(mine), {})
    assert record.failover is None and record.framework_id == "F-victim"
    with pytest.raises(TakeoverError, match="cannot read .*failover.json"):
        record.takeover()
    (mine / FAILOVER_FILE).unlink()
    with pytest.raises(TakeoverError, match="not started with --failover or --detach"):
        local_record(str(mine), {}).takeover()


def test_a_key_file_others_may_read_or_that_is_anothers_proves_nothing(tmp_path):
    env = {"TFMESOS_KEYS_DIR": str(tmp_path)}
    (tmp_path / RUN).write_text(KEY.hex() + "\n")
    (tmp_path / RUN).chmod(0o644)
    with pytest.raises(TakeoverError, match="others may read or write it"):
        keys_of(env)(RUN)
    (tmp_path / RUN).chmod(0o600)
    assert keys_of(env)(RUN) == KEY
    (tmp_path / "beef0000").symlink_to(tmp_path / RUN)
    with pytest.raises(TakeoverError, match="cannot read the run's key"):
        keys_of(env)("beef0000")
    nobody = nobody_or_skip()
    os.chown(tmp_path / RUN, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(TakeoverError, match="belongs to uid %d" % nobody.pw_uid):
        keys_of(env)(RUN)


def test_keys_the_caller_holds(tmp_path):
    (tmp_path / RUN).write_text(KEY.hex() + "\n")
    (tmp_path / RUN).chmod(0o600)     # as tfrun keeps it: the caller's alone
    held = keys_of({"TFMESOS_KEYS_DIR": str(tmp_path)})
    assert held(RUN) == KEY and held("beef0000") is None and held("not a run id") is None
    given = keys_of({}, str(tmp_path / RUN))
    assert given(RUN) == given("beef0000") == KEY
    (tmp_path / "beef0000").write_text("nonsense")
    (tmp_path / "beef0000").chmod(0o600)
    with pytest.raises(TakeoverError, match="is not a tfmesos run key"):
        held("beef0000")


class _Reader:
    def __init__(self, found):
        self.found = found

    def state(self):
        return self.found


def test_a_local_run_whose_name_starts_as_the_prefix_is_not_the_run_it_names(tmp_path):
    # tfmesos kill d: a local run named "dnn" (its directory dnn-f9d5d466)
    # was taken by its name, and killed, not the run dac9077a that the
    # master listed and the id prefix named.
    me = getpass.getuser()
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    write_record(tmp_path / "dnn-f9d5d466", "f9d5d466", "F-dnn")
    assert local_record("d", env) is None
    assert local_record("f9d5", env).framework_id == "F-dnn"
    master = _Reader(state(framework("F-dnn", run_id="f9d5d466", user=me),
                          framework("F-target", run_id="dac9077a", user=me)))
    found, _ = find_run(master, "d", env, MASTER)
    assert found.run.framework_id == "F-target"


def test_a_prefix_of_a_local_runs_id_that_names_another_run_on_the_master_is_ambiguous(
        tmp_path):
    # The local record won silently over the caller's other run with the
    # same id prefix (submitted from another machine): kill acted on the first.
    me = getpass.getuser()
    env = {"TFMESOS_RUNS_DIR": str(tmp_path)}
    write_record(tmp_path / "mine-dd000001", "dd000001", "F-local")
    both = _Reader(state(framework("F-local", run_id="dd000001", user=me),
                         framework("F-elsewhere", run_id="dd000002", user=me)))
    with pytest.raises(AmbiguousRun) as error:
        find_run(both, "dd", env, MASTER)
    text = str(error.value)
    assert text.startswith("'dd' names 2 runs of yours: run dd000001 (framework F-local, "
                           "from its record in %s" % (tmp_path / "mine-dd000001")), text
    assert "F-elsewhere (run dd000002, user %s" % me in text
    # The whole id, the run directory, or a prefix no other run of the caller's has: no doubt.
    assert find_run(both, "dd000001", env, MASTER)[0].run.framework_id == "F-local"
    assert find_run(both, str(tmp_path / "mine-dd000001"), env, MASTER)[0].run.framework_id \
        == "F-local"
    others = _Reader(state(framework("F-local", run_id="dd000001", user=me),
                           framework("F-theirs", run_id="dd000002", user="mallory")))
    assert find_run(others, "dd", env, MASTER)[0].run.framework_id == "F-local"
    # kill's live_only: a finished run with the prefix is no second candidate.
    ended = _Reader(state(framework("F-local", run_id="dd000001", user=me),
                          completed=[framework("F-old", run_id="dd000002", user=me)]))
    assert find_run(ended, "dd", env, MASTER, live_only=True)[0].run.framework_id == "F-local"


def test_finished_runs_are_each_named_with_their_own_id():
    old = framework("F-old", run_id="abcd0001", registered=50.0)
    older = framework("F-older", run_id="abcd0002", registered=40.0)
    with pytest.raises(RunNotFound) as error:
        decide(state(completed=[old, older]), "abcd", ME, no_keys, MASTER, live_only=True)
    assert str(error.value) == ("the 2 runs of yours 'abcd' names have finished already: "
                                "run abcd0001 (framework F-old); run abcd0002 (framework F-older)")
