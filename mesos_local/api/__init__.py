"""The master's HTTP side: the server (``http_server``) and how it routes a
path (``routes``), SUBSCRIBE streams (``stream``), calls checked against the
Mesos v1 messages (``validation``, ``messages``) or read as Mesos' own parser
reads them (``stout``), framework authentication (``auth``), the read
endpoints tools use (``state_json``, ``endpoints``, ``metrics``), the agents'
sandboxes (``files``) and the v1 operator API (``operator``,
``operator_json``)."""
