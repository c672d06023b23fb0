"""The agent side: what runs a task, as a Mesos agent's containerizer does.
A launch plan from the TaskInfo (``planning``), the sandbox's URIs
(``fetcher``, ``fetch_cache``), the task's process or container (``runner``,
``docker_runner``, ``container_options``, ``docker_engine``), its exit and destruction
(``executor``, ``process_tree``, ``pidfd``), isolation (``cgroups``,
``cgroup_limits``, ``fs_isolation``, ``netns``), the environment it
starts with (``environment``) and the user it runs as (``users``,
``become_user``, ``fetch_child``)."""
