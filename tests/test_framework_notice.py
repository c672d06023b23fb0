"""What a run does once its framework has an id (``FrameworkNotice``): here,
its rendezvous label, which through zk:// the framework subscribed with
before the leader, and so the tasks' route to the run, was known."""

from types import SimpleNamespace

from tfmesos.core.framework_notice import FrameworkNotice
from tfmesos.protocol import labels as labels_


class Runtime:
    """The run as the notice reads and labels it."""

    def __init__(self, subscribed_with, tasks_reach, connected=True):
        self.identity = SimpleNamespace(framework_id="f-1", framework_proof=lambda: "proof")
        self.scheduler = SimpleNamespace(framework_id="f-1")
        self.driver = SimpleNamespace(connected=connected)
        self.labels = {labels_.RENDEZVOUS: subscribed_with}
        self.tasks_reach = tasks_reach
        self.calls = []
        self.refuses = self.drops = False

    def framework_known(self, framework_id):
        return self.identity

    def rendezvous_address(self):
        return self.tasks_reach

    def rendezvous_label(self):
        return self.labels.get(labels_.RENDEZVOUS)

    def label(self, key, value):
        self.calls.append((key, value))
        if not self.driver.connected or (self.refuses and key == labels_.RENDEZVOUS):
            if self.drops:      # the subscription drops as the call is made
                self.driver.connected = False
            return False
        self.labels[key] = value
        return True


def test_the_rendezvous_label_names_the_tasks_route_once_it_differs():
    runtime = Runtime(subscribed_with="10.0.0.9:4000", tasks_reach="10.1.0.5:4000")
    notice = FrameworkNotice(runtime, record=None, adoption=None, on_framework=None)
    notice.check()
    notice.check()
    assert runtime.labels[labels_.RENDEZVOUS] == "10.1.0.5:4000"
    assert runtime.calls.count((labels_.RENDEZVOUS, "10.1.0.5:4000")) == 1


def test_a_label_that_names_it_already_is_not_set_again():
    runtime = Runtime(subscribed_with="10.1.0.5:4000", tasks_reach="10.1.0.5:4000")
    FrameworkNotice(runtime, record=None, adoption=None, on_framework=None).check()
    assert (labels_.RENDEZVOUS, "10.1.0.5:4000") not in runtime.calls


def test_a_taken_over_run_names_its_rendezvous_too():
    runtime = Runtime(subscribed_with="10.0.0.9:4000", tasks_reach="10.1.0.5:4000")
    adoption = SimpleNamespace(reconcile=lambda driver: None)
    runtime.identity.scheduler_attempt = 1
    runtime.parts = lambda: SimpleNamespace(driver=runtime.driver)
    FrameworkNotice(runtime, record=None, adoption=adoption, on_framework=None).check()
    assert runtime.labels[labels_.RENDEZVOUS] == "10.1.0.5:4000"


def test_a_master_that_refuses_the_label_is_not_asked_again_at_every_event():
    runtime = Runtime(subscribed_with="10.0.0.9:4000", tasks_reach="10.1.0.5:4000")
    runtime.refuses = True
    notice = FrameworkNotice(runtime, record=None, adoption=None, on_framework=None)
    for _ in range(5):
        notice.check()
    assert runtime.calls.count((labels_.RENDEZVOUS, "10.1.0.5:4000")) == 1


def test_a_label_the_dropped_subscription_lost_is_set_once_subscribed_again():
    runtime = Runtime(subscribed_with="10.0.0.9:4000", tasks_reach="10.1.0.5:4000")
    runtime.refuses = runtime.drops = True
    notice = FrameworkNotice(runtime, record=None, adoption=None, on_framework=None)
    notice.check()
    runtime.refuses = runtime.drops = False
    runtime.driver.connected = True
    notice.check()
    assert runtime.labels[labels_.RENDEZVOUS] == "10.1.0.5:4000"
