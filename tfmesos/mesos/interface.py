"""The scheduler callback interface, as pymesos and libmesos users know it.

Subclass ``Scheduler`` and override the callbacks you need; the driver calls
them on its single dispatcher thread, one at a time, in the order the master
sent the events. Every argument that came from the master is an
``addict.Dict`` (``offer.resources``, ``update.state``). An exception raised
by a callback stops the driver and is re-raised by ``join()`` / ``run()``.
"""


class Scheduler:
    def registered(self, driver, framework_id, master_info):
        """The first SUBSCRIBED of this driver. ``framework_id`` is
        ``{"value": ...}``; ``master_info`` the leading master's MasterInfo."""

    def reregistered(self, driver, master_info):
        """SUBSCRIBED again after a disconnection, with the same framework id:
        the framework's tasks were kept."""

    def disconnected(self, driver):
        """The subscription stream was lost (closed, broken, or silent for
        several heartbeat intervals). The driver re-subscribes by itself."""

    def resourceOffers(self, driver, offers):
        """New offers (a list of Offer). Accept them with ``launchTasks`` /
        ``acceptOffers`` or give them back with ``declineOffer``."""

    def inverseOffers(self, driver, offers):
        """Inverse offers (maintenance): resources the operator wants back."""

    def offerRescinded(self, driver, offer_id):
        """An offer is no longer valid; launching on it would fail."""

    def statusUpdate(self, driver, update):
        """A TaskStatus. With implicit acknowledgements (the default) the
        driver acknowledges it after this callback returns."""

    def frameworkMessage(self, driver, executor_id, agent_id, message):
        """A message (bytes) from an executor of this framework."""

    def slaveLost(self, driver, agent_id):
        """An agent was removed; its tasks are lost or gone."""

    def executorLost(self, driver, executor_id, agent_id, status):
        """An executor ended; ``status`` is its exit status."""

    def error(self, driver, message):
        """The master reported an unrecoverable error (or no master could be
        reached); the driver stops after this callback."""


CALLBACKS = ("registered", "reregistered", "disconnected", "resourceOffers",
             "inverseOffers", "offerRescinded", "statusUpdate", "frameworkMessage",
             "slaveLost", "executorLost", "error")
