"""The Mesos v1 messages the local master accepts, as a declarative table
(transcribed from ``include/mesos/v1/mesos.proto`` and
``include/mesos/v1/scheduler/scheduler.proto``, Mesos 1.11); ``schema``
checks calls against it.

Field types (the strings in ``MESSAGES``):

* ``string``, ``bool``, ``bytes`` (base64), ``double``, ``int32``,
  ``int64``, ``uint32``, ``uint64`` (a JSON number, or a numeric string as
  protobuf's JSON mapping allows);
* ``enum:Name`` (one of ``ENUMS[Name]``, by name);
* a message name (a JSON object checked recursively);
* ``map:T`` (a JSON object whose values are of type T);
* ``any`` (any JSON object: messages the local master never looks into);
* ``[T]`` repeated (a JSON array), a trailing ``!`` required.
"""

__all__ = ["ENUMS", "MESSAGES"]


_CAPABILITIES = (
    "UNKNOWN", "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID",
    "KILL", "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
    "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE",
    "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT",
    "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE",
    "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE")

ENUMS = {
    "Call.Type": (
        "UNKNOWN", "SUBSCRIBE", "TEARDOWN", "ACCEPT", "DECLINE", "ACCEPT_INVERSE_OFFERS",
        "DECLINE_INVERSE_OFFERS", "REVIVE", "KILL", "SHUTDOWN", "ACKNOWLEDGE",
        "ACKNOWLEDGE_OPERATION_STATUS", "RECONCILE", "RECONCILE_OPERATIONS", "MESSAGE",
        "REQUEST", "SUPPRESS", "UPDATE_FRAMEWORK"),
    "Event.Type": (
        "UNKNOWN", "SUBSCRIBED", "OFFERS", "INVERSE_OFFERS", "RESCIND",
        "RESCIND_INVERSE_OFFER", "UPDATE", "UPDATE_OPERATION_STATUS", "MESSAGE",
        "FAILURE", "ERROR", "HEARTBEAT"),
    "FrameworkInfo.Capability.Type": (
        "UNKNOWN", "REVOCABLE_RESOURCES", "TASK_KILLING_STATE", "GPU_RESOURCES",
        "SHARED_RESOURCES", "PARTITION_AWARE", "MULTI_ROLE", "RESERVATION_REFINEMENT",
        "REGION_AWARE"),
    "MasterInfo.Capability.Type": ("UNKNOWN", "AGENT_UPDATE", "AGENT_DRAINING", "QUOTA_V2"),
    "Value.Type": ("SCALAR", "RANGES", "SET", "TEXT"),
    "Resource.ReservationInfo.Type": ("UNKNOWN", "STATIC", "DYNAMIC"),
    "Resource.DiskInfo.Source.Type": ("UNKNOWN", "PATH", "MOUNT", "BLOCK", "RAW"),
    "Offer.Operation.Type": (
        "UNKNOWN", "LAUNCH", "LAUNCH_GROUP", "RESERVE", "UNRESERVE", "CREATE", "DESTROY",
        "GROW_VOLUME", "SHRINK_VOLUME", "CREATE_DISK", "DESTROY_DISK"),
    "ExecutorInfo.Type": ("UNKNOWN", "DEFAULT", "CUSTOM"),
    "CheckInfo.Type": ("UNKNOWN", "COMMAND", "HTTP", "TCP"),
    "HealthCheck.Type": ("UNKNOWN", "COMMAND", "HTTP", "TCP"),
    "NetworkInfo.Protocol": ("IPv4", "IPv6"),
    "Environment.Variable.Type": ("UNKNOWN", "VALUE", "SECRET"),
    "Secret.Type": ("UNKNOWN", "REFERENCE", "VALUE"),
    "Image.Type": ("APPC", "DOCKER"),
    "Volume.Mode": ("RW", "RO"),
    "Volume.Source.Type": (
        "UNKNOWN", "DOCKER_VOLUME", "HOST_PATH", "SANDBOX_PATH", "SECRET", "CSI_VOLUME"),
    "Volume.Source.SandboxPath.Type": ("UNKNOWN", "SELF", "PARENT"),
    "MountPropagation.Mode": ("UNKNOWN", "HOST_TO_CONTAINER", "BIDIRECTIONAL"),
    "ContainerInfo.Type": ("DOCKER", "MESOS"),
    "ContainerInfo.DockerInfo.Network": ("HOST", "BRIDGE", "NONE", "USER"),
    "CapabilityInfo.Capability": _CAPABILITIES,
    "LinuxInfo.IpcMode": ("UNKNOWN", "PRIVATE", "SHARE_PARENT"),
    "RLimitInfo.RLimit.Type": (
        "UNKNOWN", "RLMT_AS", "RLMT_CORE", "RLMT_CPU", "RLMT_DATA", "RLMT_FSIZE",
        "RLMT_LOCKS", "RLMT_MEMLOCK", "RLMT_MSGQUEUE", "RLMT_NICE", "RLMT_NOFILE",
        "RLMT_NPROC", "RLMT_RSS", "RLMT_RTPRIO", "RLMT_RTTIME", "RLMT_SIGPENDING",
        "RLMT_STACK"),
    "DiscoveryInfo.Visibility": ("FRAMEWORK", "CLUSTER", "EXTERNAL"),
    "TaskState": (
        "TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING", "TASK_FINISHED",
        "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED",
        "TASK_UNREACHABLE", "TASK_GONE", "TASK_GONE_BY_OPERATOR", "TASK_UNKNOWN"),
    "TaskStatus.Source": ("SOURCE_MASTER", "SOURCE_AGENT", "SOURCE_EXECUTOR"),
    "TaskStatus.Reason": (
        "REASON_COMMAND_EXECUTOR_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
        "REASON_CONTAINER_LIMITATION", "REASON_CONTAINER_LIMITATION_DISK",
        "REASON_CONTAINER_LIMITATION_MEMORY", "REASON_CONTAINER_PREEMPTED",
        "REASON_CONTAINER_UPDATE_FAILED", "REASON_MAX_COMPLETION_TIME_REACHED",
        "REASON_EXECUTOR_REGISTRATION_TIMEOUT", "REASON_EXECUTOR_REREGISTRATION_TIMEOUT",
        "REASON_EXECUTOR_TERMINATED", "REASON_EXECUTOR_UNREGISTERED",
        "REASON_FRAMEWORK_REMOVED", "REASON_GC_ERROR", "REASON_INVALID_FRAMEWORKID",
        "REASON_INVALID_OFFERS", "REASON_IO_SWITCHBOARD_EXITED",
        "REASON_MASTER_DISCONNECTED", "REASON_RECONCILIATION", "REASON_RESOURCES_UNKNOWN",
        "REASON_AGENT_DISCONNECTED", "REASON_AGENT_DRAINING", "REASON_AGENT_REMOVED",
        "REASON_AGENT_REMOVED_BY_OPERATOR", "REASON_AGENT_REREGISTERED",
        "REASON_AGENT_RESTARTED", "REASON_AGENT_UNKNOWN",
        "REASON_TASK_KILLED_DURING_LAUNCH", "REASON_TASK_CHECK_STATUS_UPDATED",
        "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED", "REASON_TASK_GROUP_INVALID",
        "REASON_TASK_GROUP_UNAUTHORIZED", "REASON_TASK_INVALID", "REASON_TASK_UNAUTHORIZED",
        "REASON_TASK_UNKNOWN"),
}

_ID = {"value": "string!"}

MESSAGES = {
    # --- mesos.v1.scheduler.Call ------------------------------------------------
    "Call": {
        "framework_id": "FrameworkID", "type": "enum:Call.Type",
        "subscribe": "Call.Subscribe", "accept": "Call.Accept", "decline": "Call.Decline",
        "accept_inverse_offers": "Call.AcceptInverseOffers",
        "decline_inverse_offers": "Call.DeclineInverseOffers",
        "revive": "Call.Revive", "kill": "Call.Kill", "shutdown": "Call.Shutdown",
        "acknowledge": "Call.Acknowledge",
        "acknowledge_operation_status": "Call.AcknowledgeOperationStatus",
        "reconcile": "Call.Reconcile", "reconcile_operations": "Call.ReconcileOperations",
        "message": "Call.Message", "request": "Call.Request", "suppress": "Call.Suppress",
        "update_framework": "Call.UpdateFramework"},
    "Call.Subscribe": {"framework_info": "FrameworkInfo!", "suppressed_roles": "[string]",
                       "offer_constraints": "any"},
    "Call.UpdateFramework": {"framework_info": "FrameworkInfo!",
                             "suppressed_roles": "[string]", "offer_constraints": "any"},
    "Call.Accept": {"offer_ids": "[OfferID]", "operations": "[Offer.Operation]",
                    "filters": "Filters"},
    "Call.Decline": {"offer_ids": "[OfferID]", "filters": "Filters"},
    "Call.AcceptInverseOffers": {"inverse_offer_ids": "[OfferID]", "filters": "Filters"},
    "Call.DeclineInverseOffers": {"inverse_offer_ids": "[OfferID]", "filters": "Filters"},
    "Call.Revive": {"roles": "[string]"},
    "Call.Suppress": {"roles": "[string]"},
    "Call.Kill": {"task_id": "TaskID!", "agent_id": "AgentID", "kill_policy": "KillPolicy"},
    "Call.Shutdown": {"executor_id": "ExecutorID!", "agent_id": "AgentID!"},
    "Call.Acknowledge": {"agent_id": "AgentID!", "task_id": "TaskID!", "uuid": "bytes!"},
    "Call.AcknowledgeOperationStatus": {
        "agent_id": "AgentID", "resource_provider_id": "ResourceProviderID",
        "uuid": "bytes!", "operation_id": "OperationID!"},
    "Call.Reconcile": {"tasks": "[Call.Reconcile.Task]"},
    "Call.Reconcile.Task": {"task_id": "TaskID!", "agent_id": "AgentID"},
    "Call.ReconcileOperations": {"operations": "[Call.ReconcileOperations.Operation]"},
    "Call.ReconcileOperations.Operation": {
        "operation_id": "OperationID!", "agent_id": "AgentID",
        "resource_provider_id": "ResourceProviderID"},
    "Call.Message": {"agent_id": "AgentID!", "executor_id": "ExecutorID!", "data": "bytes!"},
    "Call.Request": {"requests": "[Request]"},

    # --- mesos.v1.scheduler.Event (the master's own output, checked in tests) ---
    "Event": {
        "type": "enum:Event.Type", "subscribed": "Event.Subscribed", "offers": "Event.Offers",
        "inverse_offers": "any", "rescind": "Event.Rescind", "rescind_inverse_offer": "any",
        "update": "Event.Update", "update_operation_status": "any",
        "message": "Event.Message", "failure": "Event.Failure", "error": "Event.Error"},
    "Event.Subscribed": {"framework_id": "FrameworkID!", "heartbeat_interval_seconds": "double",
                         "master_info": "MasterInfo"},
    "Event.Offers": {"offers": "[Offer]"},
    "Event.Rescind": {"offer_id": "OfferID!"},
    "Event.Update": {"status": "TaskStatus!"},
    "Event.Message": {"agent_id": "AgentID!", "executor_id": "ExecutorID!", "data": "bytes!"},
    "Event.Failure": {"agent_id": "AgentID", "executor_id": "ExecutorID", "status": "int32"},
    "Event.Error": {"message": "string!"},

    # --- ids and small values -------------------------------------------------
    "FrameworkID": _ID, "OfferID": _ID, "AgentID": _ID, "TaskID": _ID,
    "ExecutorID": _ID, "ResourceProviderID": _ID, "OperationID": _ID,
    "ContainerID": {"value": "string!", "parent": "ContainerID"},
    "TimeInfo": {"nanoseconds": "int64!"},
    "DurationInfo": {"nanoseconds": "int64!"},
    "Address": {"hostname": "string", "ip": "string", "port": "int32!"},
    "URL": {"scheme": "string!", "address": "Address!", "path": "string",
            "query": "[Parameter]", "fragment": "string"},
    "Parameter": {"key": "string!", "value": "string!"},
    "Parameters": {"parameter": "[Parameter]"},
    "Credential": {"principal": "string!", "secret": "string"},
    "Labels": {"labels": "[Label]"},
    "Label": {"key": "string!", "value": "string"},
    "Secret": {"type": "enum:Secret.Type", "reference": "Secret.Reference",
               "value": "Secret.Value"},
    "Secret.Reference": {"name": "string!", "key": "string"},
    "Secret.Value": {"data": "bytes!"},

    # --- frameworks and masters -----------------------------------------------
    "FrameworkInfo": {
        "user": "string!", "name": "string!", "id": "FrameworkID",
        "failover_timeout": "double", "checkpoint": "bool", "role": "string",
        "roles": "[string]", "hostname": "string", "principal": "string",
        "webui_url": "string", "capabilities": "[FrameworkInfo.Capability]",
        "labels": "Labels", "offer_filters": "map:OfferFilters"},
    "FrameworkInfo.Capability": {"type": "enum:FrameworkInfo.Capability.Type"},
    "OfferFilters": {"min_allocatable_resources": "OfferFilters.MinAllocatableResources"},
    "OfferFilters.MinAllocatableResources": {
        "quantities": "[OfferFilters.ResourceQuantities]"},
    "OfferFilters.ResourceQuantities": {"quantities": "map:Value.Scalar"},
    "MasterInfo": {
        "id": "string!", "ip": "uint32!", "port": "uint32!", "pid": "string",
        "hostname": "string", "version": "string", "address": "Address", "domain": "any",
        "capabilities": "[MasterInfo.Capability]"},
    "MasterInfo.Capability": {"type": "enum:MasterInfo.Capability.Type"},
    "Filters": {"refuse_seconds": "double"},
    "Request": {"agent_id": "AgentID", "resources": "[Resource]"},

    # --- values, attributes, resources ----------------------------------------
    "Value.Scalar": {"value": "double!"},
    "Value.Range": {"begin": "uint64!", "end": "uint64!"},
    "Value.Ranges": {"range": "[Value.Range]"},
    "Value.Set": {"item": "[string]"},
    "Value.Text": {"value": "string!"},
    "Attribute": {"name": "string!", "type": "enum:Value.Type!", "scalar": "Value.Scalar",
                  "ranges": "Value.Ranges", "set": "Value.Set", "text": "Value.Text"},
    "Resource": {
        "provider_id": "ResourceProviderID", "name": "string!", "type": "enum:Value.Type!",
        "scalar": "Value.Scalar", "ranges": "Value.Ranges", "set": "Value.Set",
        "role": "string", "allocation_info": "Resource.AllocationInfo",
        "reservation": "Resource.ReservationInfo",
        "reservations": "[Resource.ReservationInfo]", "disk": "Resource.DiskInfo",
        "revocable": "Resource.RevocableInfo", "shared": "Resource.SharedInfo"},
    "Resource.AllocationInfo": {"role": "string"},
    "Resource.ReservationInfo": {"type": "enum:Resource.ReservationInfo.Type",
                                 "role": "string", "principal": "string", "labels": "Labels"},
    "Resource.DiskInfo": {"persistence": "Resource.DiskInfo.Persistence", "volume": "Volume",
                          "source": "Resource.DiskInfo.Source"},
    "Resource.DiskInfo.Persistence": {"id": "string!", "principal": "string"},
    "Resource.DiskInfo.Source": {
        "type": "enum:Resource.DiskInfo.Source.Type!", "path": "Resource.DiskInfo.Source.Path",
        "mount": "Resource.DiskInfo.Source.Mount", "vendor": "string", "id": "string",
        "metadata": "Labels", "profile": "string"},
    "Resource.DiskInfo.Source.Path": {"root": "string"},
    "Resource.DiskInfo.Source.Mount": {"root": "string"},
    "Resource.RevocableInfo": {},
    "Resource.SharedInfo": {},

    # --- offers and operations ------------------------------------------------
    "Offer": {
        "id": "OfferID!", "framework_id": "FrameworkID!", "agent_id": "AgentID!",
        "hostname": "string!", "url": "URL", "domain": "any", "resources": "[Resource]",
        "attributes": "[Attribute]", "executor_ids": "[ExecutorID]", "unavailability": "any",
        "allocation_info": "Resource.AllocationInfo"},
    "Offer.Operation": {
        "type": "enum:Offer.Operation.Type", "id": "OperationID",
        "launch": "Offer.Operation.Launch", "launch_group": "Offer.Operation.LaunchGroup",
        "reserve": "Offer.Operation.Reserve", "unreserve": "Offer.Operation.Unreserve",
        "create": "Offer.Operation.Create", "destroy": "Offer.Operation.Destroy",
        "grow_volume": "Offer.Operation.GrowVolume",
        "shrink_volume": "Offer.Operation.ShrinkVolume",
        "create_disk": "Offer.Operation.CreateDisk",
        "destroy_disk": "Offer.Operation.DestroyDisk"},
    "Offer.Operation.Launch": {"task_infos": "[TaskInfo]"},
    "Offer.Operation.LaunchGroup": {"executor": "ExecutorInfo!", "task_group": "TaskGroupInfo!"},
    "Offer.Operation.Reserve": {"source": "[Resource]", "resources": "[Resource]"},
    "Offer.Operation.Unreserve": {"resources": "[Resource]"},
    "Offer.Operation.Create": {"volumes": "[Resource]"},
    "Offer.Operation.Destroy": {"volumes": "[Resource]"},
    "Offer.Operation.GrowVolume": {"volume": "Resource!", "addition": "Resource!"},
    "Offer.Operation.ShrinkVolume": {"volume": "Resource!", "subtract": "Value.Scalar!"},
    "Offer.Operation.CreateDisk": {"source": "Resource!",
                                   "target_type": "enum:Resource.DiskInfo.Source.Type!",
                                   "target_profile": "string"},
    "Offer.Operation.DestroyDisk": {"source": "Resource!"},
    "TaskGroupInfo": {"tasks": "[TaskInfo]"},

    # --- tasks ----------------------------------------------------------------
    "TaskInfo": {
        "name": "string!", "task_id": "TaskID!", "agent_id": "AgentID!",
        "resources": "[Resource]", "executor": "ExecutorInfo", "command": "CommandInfo",
        "container": "ContainerInfo", "health_check": "HealthCheck", "check": "CheckInfo",
        "kill_policy": "KillPolicy", "data": "bytes", "labels": "Labels",
        "discovery": "DiscoveryInfo", "max_completion_time": "DurationInfo",
        "limits": "map:Value.Scalar"},
    "ExecutorInfo": {
        "type": "enum:ExecutorInfo.Type", "executor_id": "ExecutorID!",
        "framework_id": "FrameworkID", "command": "CommandInfo", "container": "ContainerInfo",
        "resources": "[Resource]", "name": "string", "source": "string", "data": "bytes",
        "discovery": "DiscoveryInfo", "shutdown_grace_period": "DurationInfo",
        "labels": "Labels"},
    "KillPolicy": {"grace_period": "DurationInfo"},
    "CommandInfo": {"uris": "[CommandInfo.URI]", "environment": "Environment",
                    "shell": "bool", "value": "string", "arguments": "[string]",
                    "user": "string"},
    "CommandInfo.URI": {"value": "string!", "executable": "bool", "extract": "bool",
                        "cache": "bool", "output_file": "string"},
    "Environment": {"variables": "[Environment.Variable]"},
    "Environment.Variable": {"name": "string!", "type": "enum:Environment.Variable.Type",
                             "value": "string", "secret": "Secret"},
    "HealthCheck": {
        "delay_seconds": "double", "interval_seconds": "double", "timeout_seconds": "double",
        "consecutive_failures": "uint32", "grace_period_seconds": "double",
        "type": "enum:HealthCheck.Type", "command": "CommandInfo",
        "http": "HealthCheck.HTTPCheckInfo", "tcp": "HealthCheck.TCPCheckInfo"},
    "HealthCheck.HTTPCheckInfo": {"protocol": "enum:NetworkInfo.Protocol", "scheme": "string",
                                  "port": "uint32!", "path": "string", "statuses": "[uint32]"},
    "HealthCheck.TCPCheckInfo": {"protocol": "enum:NetworkInfo.Protocol", "port": "uint32!"},
    "CheckInfo": {"type": "enum:CheckInfo.Type", "command": "CheckInfo.Command",
                  "http": "CheckInfo.Http", "tcp": "CheckInfo.Tcp", "delay_seconds": "double",
                  "interval_seconds": "double", "timeout_seconds": "double"},
    "CheckInfo.Command": {"command": "CommandInfo!"},
    "CheckInfo.Http": {"port": "uint32!", "path": "string"},
    "CheckInfo.Tcp": {"port": "uint32!"},
    "DiscoveryInfo": {"visibility": "enum:DiscoveryInfo.Visibility!", "name": "string",
                      "environment": "string", "location": "string", "version": "string",
                      "ports": "Ports", "labels": "Labels"},
    "Ports": {"ports": "[Port]"},
    "Port": {"number": "uint32!", "name": "string", "protocol": "string",
             "visibility": "enum:DiscoveryInfo.Visibility", "labels": "Labels"},
    "TaskStatus": {
        "task_id": "TaskID!", "state": "enum:TaskState!", "message": "string",
        "source": "enum:TaskStatus.Source", "reason": "enum:TaskStatus.Reason",
        "data": "bytes", "agent_id": "AgentID", "executor_id": "ExecutorID",
        "timestamp": "double", "uuid": "bytes", "healthy": "bool", "check_status": "any",
        "labels": "Labels", "container_status": "any", "unreachable_time": "TimeInfo",
        "limitation": "any"},

    # --- containers -----------------------------------------------------------
    "ContainerInfo": {
        "type": "enum:ContainerInfo.Type!", "volumes": "[Volume]", "hostname": "string",
        "docker": "ContainerInfo.DockerInfo", "mesos": "ContainerInfo.MesosInfo",
        "network_infos": "[NetworkInfo]", "linux_info": "LinuxInfo",
        "rlimit_info": "RLimitInfo", "tty_info": "TTYInfo"},
    "ContainerInfo.DockerInfo": {
        "image": "string!", "network": "enum:ContainerInfo.DockerInfo.Network",
        "port_mappings": "[ContainerInfo.DockerInfo.PortMapping]", "privileged": "bool",
        "parameters": "[Parameter]", "force_pull_image": "bool", "volume_driver": "string"},
    "ContainerInfo.DockerInfo.PortMapping": {"host_port": "uint32!", "container_port": "uint32!",
                                             "protocol": "string"},
    "ContainerInfo.MesosInfo": {"image": "Image"},
    "Image": {"type": "enum:Image.Type!", "appc": "Image.Appc", "docker": "Image.Docker",
              "cached": "bool"},
    "Image.Appc": {"name": "string!", "id": "string", "labels": "Labels"},
    "Image.Docker": {"name": "string!", "credential": "Credential", "config": "Secret"},
    "Volume": {"mode": "enum:Volume.Mode!", "container_path": "string!", "host_path": "string",
               "image": "Image", "source": "Volume.Source"},
    "Volume.Source": {
        "type": "enum:Volume.Source.Type", "docker_volume": "Volume.Source.DockerVolume",
        "host_path": "Volume.Source.HostPath", "sandbox_path": "Volume.Source.SandboxPath",
        "secret": "Secret", "csi_volume": "any"},
    "Volume.Source.DockerVolume": {"driver": "string", "name": "string!",
                                   "driver_options": "Parameters"},
    "Volume.Source.HostPath": {"path": "string!", "mount_propagation": "MountPropagation"},
    "Volume.Source.SandboxPath": {"type": "enum:Volume.Source.SandboxPath.Type",
                                  "path": "string!"},
    "MountPropagation": {"mode": "enum:MountPropagation.Mode"},
    "NetworkInfo": {"ip_addresses": "[NetworkInfo.IPAddress]", "name": "string",
                    "groups": "[string]", "labels": "Labels",
                    "port_mappings": "[NetworkInfo.PortMapping]"},
    "NetworkInfo.IPAddress": {"protocol": "enum:NetworkInfo.Protocol", "ip_address": "string"},
    "NetworkInfo.PortMapping": {"host_port": "uint32!", "container_port": "uint32!",
                                "protocol": "string"},
    "CapabilityInfo": {"capabilities": "[enum:CapabilityInfo.Capability]"},
    "SeccompInfo": {"profile_name": "string", "unconfined": "bool"},
    "LinuxInfo": {"capability_info": "CapabilityInfo", "bounding_capabilities": "CapabilityInfo",
                  "effective_capabilities": "CapabilityInfo", "share_pid_namespace": "bool",
                  "seccomp": "SeccompInfo", "ipc_mode": "enum:LinuxInfo.IpcMode",
                  "shm_size": "uint32", "share_cgroups": "bool"},
    "RLimitInfo": {"rlimits": "[RLimitInfo.RLimit]"},
    "RLimitInfo.RLimit": {"type": "enum:RLimitInfo.RLimit.Type", "hard": "uint64",
                          "soft": "uint64"},
    "TTYInfo": {"window_size": "TTYInfo.WindowSize"},
    "TTYInfo.WindowSize": {"rows": "uint32!", "columns": "uint32!"},
}
