"""The master's HTTP side: the server (``http_server``), SUBSCRIBE streams
(``stream``), calls checked against the Mesos v1 messages (``validation``,
``messages``) or read as Mesos' own parser reads them (``stout``), framework
authentication (``auth``), and the read endpoints tools use (``state_json``,
``endpoints``, ``metrics``)."""
