"""Column definitions of the API server's per-kind Tables (``printers.go``), verbatim, as 1.28,
1.32 and 1.36 send them (:func:`columns_for`; other versions print as the nearest older of these,
:attr:`KubeVersion.table_columns`).

Descriptions are the API server's own (OpenAPI field docs), as it sends them."""

from __future__ import annotations

from cacheproxy.kube.versions import KUBE_1_36, NEWEST, OLDEST, KubeVersion

__all__ = ["COLUMNS", "Column", "columns_for"]

Column = tuple[str, str, str, int, str]
"""(name, type, format, priority, description)"""

_D0 = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
_D1 = "The aggregate readiness state of this pod for accepting traffic."
_D2 = "The aggregate status of the containers in this pod."
_D3 = "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."
_D4 = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
_D5 = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."
_D6 = "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements."
_D7 = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."
_D8 = 'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates'
_D9 = "The status of the namespace"
_D10 = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."
_D11 = "The status of the node"
_D12 = "The roles of the node"
_D13 = "Kubelet Version reported by the node."
_D14 = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP)."
_D15 = "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."
_D16 = "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."
_D17 = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."
_D18 = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
_D19 = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"
_D20 = 'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret'
_D21 = 'type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. "NodePort" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. "LoadBalancer" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. "ExternalName" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types'
_D22 = 'clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are "None", empty string (""), or a valid IP address. Setting this to "None" makes a "headless service" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies'
_D23 = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system."
_D24 = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
_D25 = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"
_D26 = "phase represents the current phase of PersistentVolumeClaim."
_D27 = "volumeName is the binding reference to the PersistentVolume backing this claim."
_D28 = "capacity represents the actual resources of the underlying volume."
_D29 = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"
_D30 = "StorageClass of the pvc"
_D31 = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."
_D32 = "The time at which the most recent occurrence of this event was recorded."
_D33 = "Type of this event (Normal, Warning), new types could be added in the future"
_D34 = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."
_D35 = "The object that this event is about."
_D36 = 'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.'
_D37 = "The component reporting this event. Should be a short machine understandable string."
_D38 = "A human-readable description of the status of this operation."
_D39 = "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"
_D40 = "The number of times this event has occurred."
_D41 = "Number of the pod with ready state"
_D42 = "Total number of non-terminated pods targeted by this deployment that have the desired template spec."
_D43 = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."
_D44 = "Names of each container in the template."
_D45 = "Images referenced by each container in the template."
_D46 = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."
_D47 = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
_D48 = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
_D49 = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."
_D50 = "The total number of nodes that are running updated daemon pod"
_D51 = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"
_D52 = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"
_D53 = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
_D54 = "The number of pods which reached phase Succeeded."
_D55 = "Time required to complete the job."
_D56 = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
_D57 = "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
_D58 = "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."
_D59 = "A list of pointers to currently running jobs."
_D60 = "Information when was the last time the job was successfully scheduled."

_D61 = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"
_D62 = "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"
_D63 = "The number of ready replicas for this replica set."
_D64 = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
_D65 = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."
_D66 = "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"
_D67 = "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"
_D68 = "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"
_D69 = "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"
_D70 = "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"
_D71 = "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."
_D72 = "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec."

# Kinds of the API server's other list-and-watch resources, as 1.28 sends them.
_MORE_1_28: dict[tuple[str, str], tuple[Column, ...]] = {
    ("", "replicationcontrollers"): (
        ("Name", "string", "name", 0, _D0),
        (
            "Desired",
            "integer",
            "",
            0,
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        (
            "Current",
            "integer",
            "",
            0,
            "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        (
            "Ready",
            "integer",
            "",
            0,
            "The number of ready replicas for this replication controller.",
        ),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, "Names of each container in the template."),
        ("Images", "string", "", 1, "Images referenced by each container in the template."),
        (
            "Selector",
            "string",
            "",
            1,
            "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ),
    ),
    ("", "resourcequotas"): (
        ("Name", "string", "name", 0, _D0),
        ("Age", "string", "", 0, _D4),
        (
            "Request",
            "string",
            "",
            0,
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        (
            "Limit",
            "string",
            "",
            0,
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ),
    ("", "limitranges"): (
        ("Name", "string", "name", 0, _D0),
        ("Created At", "date", "", 0, _D4),
    ),
    ("", "podtemplates"): (
        ("Name", "string", "name", 0, _D0),
        ("Containers", "string", "", 0, "Names of each container in the template."),
        ("Images", "string", "", 0, "Images referenced by each container in the template."),
        ("Pod Labels", "string", "", 0, "The labels for the pod template."),
    ),
    ("apps", "controllerrevisions"): (
        ("Name", "string", "name", 0, _D0),
        ("Controller", "string", "", 0, "Controller of the object"),
        (
            "Revision",
            "string",
            "",
            0,
            "revision indicates the revision of the state represented by Data.",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("discovery.k8s.io", "endpointslices"): (
        ("Name", "string", "name", 0, _D0),
        (
            "AddressType",
            "string",
            "",
            0,
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
        ),
        (
            "Ports",
            "string",
            "",
            0,
            'ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates "all ports". Each slice may include a maximum of 100 ports.',
        ),
        (
            "Endpoints",
            "string",
            "",
            0,
            "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("coordination.k8s.io", "leases"): (
        ("Name", "string", "name", 0, _D0),
        (
            "Holder",
            "string",
            "",
            0,
            "holderIdentity contains the identity of the holder of a current lease.",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("policy", "poddisruptionbudgets"): (
        ("Name", "string", "name", 0, _D0),
        ("Min Available", "string", "", 0, "The minimum number of pods that must be available."),
        ("Max Unavailable", "string", "", 0, "The maximum number of pods that may be unavailable."),
        (
            "Allowed Disruptions",
            "integer",
            "",
            0,
            "Calculated number of pods that may be disrupted at this time.",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("storage.k8s.io", "storageclasses"): (
        ("Name", "string", "name", 0, _D0),
        ("Provisioner", "string", "", 0, "provisioner indicates the type of the provisioner."),
        (
            "ReclaimPolicy",
            "string",
            "",
            0,
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
        ),
        (
            "VolumeBindingMode",
            "string",
            "",
            0,
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
        ),
        (
            "AllowVolumeExpansion",
            "string",
            "",
            0,
            "allowVolumeExpansion shows whether the storage class allow volume expand.",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("storage.k8s.io", "csinodes"): (
        ("Name", "string", "name", 0, _D0),
        (
            "Drivers",
            "integer",
            "",
            0,
            "Drivers indicates the number of CSI drivers registered on the node",
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("storage.k8s.io", "csidrivers"): (
        ("Name", "string", "name", 0, _D0),
        (
            "AttachRequired",
            "boolean",
            "",
            0,
            "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the CSIDriverRegistry feature gate is enabled and the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.",
        ),
        (
            "PodInfoOnMount",
            "boolean",
            "",
            0,
            'podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeConext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. "csi.storage.k8s.io/pod.name": pod.Name "csi.storage.k8s.io/pod.namespace": pod.Namespace "csi.storage.k8s.io/pod.uid": string(pod.UID) "csi.storage.k8s.io/ephemeral": "true" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise "false"\n\n"csi.storage.k8s.io/ephemeral" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the "Persistent" and "Ephemeral" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn\'t support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field is immutable.',
        ),
        (
            "StorageCapacity",
            "boolean",
            "",
            0,
            "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable.",
        ),
        (
            "TokenRequests",
            "string",
            "",
            0,
            'tokenRequests indicates the CSI driver needs pods\' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: "csi.storage.k8s.io/serviceAccount.tokens": {\n  "<audience>": {\n    "token": <token>,\n    "expirationTimestamp": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically.',
        ),
        (
            "RequiresRepublish",
            "boolean",
            "",
            0,
            "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container.",
        ),
        (
            "Modes",
            "string",
            "",
            0,
            'volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is "Persistent", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is "Ephemeral". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable.',
        ),
        ("Age", "string", "", 0, _D4),
    ),
    ("rbac.authorization.k8s.io", "clusterroles"): (
        ("Name", "string", "name", 0, _D0),
        ("Created At", "date", "", 0, _D4),
    ),
}


COLUMNS_1_28: dict[tuple[str, str], tuple[Column, ...]] = {
    ("", "pods"): (
        ("Name", "string", "name", 0, _D0),
        ("Ready", "string", "", 0, _D1),
        ("Status", "string", "", 0, _D2),
        ("Restarts", "string", "", 0, _D3),
        ("Age", "string", "", 0, _D4),
        ("IP", "string", "", 1, _D5),
        ("Node", "string", "", 1, _D6),
        ("Nominated Node", "string", "", 1, _D7),
        ("Readiness Gates", "string", "", 1, _D8),
    ),
    ("", "namespaces"): (
        ("Name", "string", "name", 0, _D0),
        ("Status", "string", "", 0, _D9),
        ("Age", "string", "", 0, _D4),
    ),
    ("", "configmaps"): (
        ("Name", "string", "name", 0, _D0),
        ("Data", "string", "", 0, _D10),
        ("Age", "string", "", 0, _D4),
    ),
    ("", "nodes"): (
        ("Name", "string", "name", 0, _D0),
        ("Status", "string", "", 0, _D11),
        ("Roles", "string", "", 0, _D12),
        ("Age", "string", "", 0, _D4),
        ("Version", "string", "", 0, _D13),
        ("Internal-IP", "string", "", 1, _D14),
        ("External-IP", "string", "", 1, _D14),
        ("OS-Image", "string", "", 1, _D15),
        ("Kernel-Version", "string", "", 1, _D16),
        ("Container-Runtime", "string", "", 1, _D17),
    ),
    ("", "secrets"): (
        ("Name", "string", "name", 0, _D0),
        ("Type", "string", "", 0, _D18),
        ("Data", "string", "", 0, _D19),
        ("Age", "string", "", 0, _D4),
    ),
    ("", "serviceaccounts"): (
        ("Name", "string", "name", 0, _D0),
        ("Secrets", "string", "", 0, _D20),
        ("Age", "string", "", 0, _D4),
    ),
    ("", "services"): (
        ("Name", "string", "name", 0, _D0),
        ("Type", "string", "", 0, _D21),
        ("Cluster-IP", "string", "", 0, _D22),
        ("External-IP", "string", "", 0, _D23),
        ("Port(s)", "string", "", 0, _D24),
        ("Age", "string", "", 0, _D4),
        ("Selector", "string", "", 1, _D25),
    ),
    ("", "persistentvolumeclaims"): (
        ("Name", "string", "name", 0, _D0),
        ("Status", "string", "", 0, _D26),
        ("Volume", "string", "", 0, _D27),
        ("Capacity", "string", "", 0, _D28),
        ("Access Modes", "string", "", 0, _D29),
        ("StorageClass", "string", "", 0, _D30),
        ("Age", "string", "", 0, _D4),
        ("VolumeMode", "string", "", 1, _D31),
    ),
    ("", "events"): (
        ("Last Seen", "string", "", 0, _D32),
        ("Type", "string", "", 0, _D33),
        ("Reason", "string", "", 0, _D34),
        ("Object", "string", "", 0, _D35),
        ("Subobject", "string", "", 1, _D36),
        ("Source", "string", "", 1, _D37),
        ("Message", "string", "", 0, _D38),
        ("First Seen", "string", "", 1, _D39),
        ("Count", "string", "", 1, _D40),
        ("Name", "string", "name", 1, _D0),
    ),
    ("apps", "deployments"): (
        ("Name", "string", "name", 0, _D0),
        ("Ready", "string", "", 0, _D41),
        ("Up-to-date", "string", "", 0, _D42),
        ("Available", "string", "", 0, _D43),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
        ("Selector", "string", "", 1, _D46),
    ),
    ("apps", "statefulsets"): (
        ("Name", "string", "name", 0, _D0),
        ("Ready", "string", "", 0, _D41),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
    ),
    ("apps", "daemonsets"): (
        ("Name", "string", "name", 0, _D0),
        ("Desired", "integer", "", 0, _D47),
        ("Current", "integer", "", 0, _D48),
        ("Ready", "integer", "", 0, _D49),
        ("Up-to-date", "integer", "", 0, _D50),
        ("Available", "integer", "", 0, _D51),
        ("Node Selector", "string", "", 0, _D52),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
        ("Selector", "string", "", 1, _D53),
    ),
    ("batch", "jobs"): (
        ("Name", "string", "name", 0, _D0),
        ("Completions", "string", "", 0, _D54),
        ("Duration", "string", "", 0, _D55),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
        ("Selector", "string", "", 1, _D56),
    ),
    ("batch", "cronjobs"): (
        ("Name", "string", "name", 0, _D0),
        ("Schedule", "string", "", 0, _D57),
        ("Suspend", "boolean", "", 0, _D58),
        ("Active", "integer", "", 0, _D59),
        ("Last Schedule", "string", "", 0, _D60),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
        ("Selector", "string", "", 1, _D56),
    ),
    ("", "endpoints"): (
        ("Name", "string", "name", 0, _D0),
        ("Endpoints", "string", "", 0, _D65),
        ("Age", "string", "", 0, _D4),
    ),
    ("", "persistentvolumes"): (
        ("Name", "string", "name", 0, _D0),
        ("Capacity", "string", "", 0, _D66),
        ("Access Modes", "string", "", 0, _D67),
        ("Reclaim Policy", "string", "", 0, _D68),
        ("Status", "string", "", 0, _D69),
        ("Claim", "string", "", 0, _D70),
        ("StorageClass", "string", "", 0, "StorageClass of the pv"),
        ("Reason", "string", "", 0, _D71),
        ("Age", "string", "", 0, _D4),
        ("VolumeMode", "string", "", 1, _D72),
    ),
    ("apps", "replicasets"): (
        ("Name", "string", "name", 0, _D0),
        ("Desired", "integer", "", 0, _D61),
        ("Current", "integer", "", 0, _D62),
        ("Ready", "integer", "", 0, _D63),
        ("Age", "string", "", 0, _D4),
        ("Containers", "string", "", 1, _D44),
        ("Images", "string", "", 1, _D45),
        ("Selector", "string", "", 1, _D64),
    ),
    ("networking.k8s.io", "ingresses"): (
        ("Name", "string", "name", 0, _D0),
        (
            "Class",
            "string",
            "",
            0,
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        (
            "Hosts",
            "string",
            "",
            0,
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        (
            "Address",
            "string",
            "",
            0,
            "Address is a list containing ingress points for the load-balancer",
        ),
        ("Ports", "string", "", 0, "Ports of TLS configurations that open"),
        ("Age", "string", "", 0, _D4),
    ),
    **_MORE_1_28,
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        ("Name", "string", "name", 0, _D0),
        ("Created At", "date", "", 0, _D4),
    ),
    ("*", "default"): (
        ("Name", "string", "name", 0, _D0),
        ("Created At", "date", "", 0, _D4),
    ),
}
"""The columns of kube-apiserver 1.28, by (group, resource); ``("*", "default")`` for kinds
without a printer of their own."""


def _with(
    columns: tuple[Column, ...],
    *,
    after: str | None = None,
    add: Column | None = None,
    **described: str,
) -> tuple[Column, ...]:
    """``columns`` with ``add`` inserted after the column named ``after``, and the columns named
    in ``described`` (spaces and dashes as underscores) described anew."""
    out: list[Column] = []
    for name, kind, fmt, priority, description in columns:
        description = described.get(name.replace("-", "_").replace(" ", "_"), description)
        out.append((name, kind, fmt, priority, description))
        if add is not None and name == after:
            out.append(add)
    return tuple(out)


_NODE_ADDRESSES = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP)."
_V28 = COLUMNS_1_28
COLUMNS: dict[tuple[str, str], tuple[Column, ...]] = {
    **COLUMNS_1_28,
    ("", "pods"): _with(
        _V28[("", "pods")],
        Node="NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    ("", "serviceaccounts"): _with(
        _V28[("", "serviceaccounts")],
        Secrets='Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". The "kubernetes.io/enforce-mountable-secrets" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret',
    ),
    ("", "nodes"): _with(
        _V28[("", "nodes")], Internal_IP=_NODE_ADDRESSES, External_IP=_NODE_ADDRESSES
    ),
    ("", "persistentvolumeclaims"): _with(
        _V28[("", "persistentvolumeclaims")],
        after="StorageClass",
        add=("VolumeAttributesClass", "string", "", 0, "VolumeAttributesClass of the pvc"),
    ),
    ("", "persistentvolumes"): _with(
        _V28[("", "persistentvolumes")],
        after="StorageClass",
        add=("VolumeAttributesClass", "string", "", 0, "VolumeAttributesClass of the pv"),
    ),
    ("batch", "jobs"): _with(
        _V28[("batch", "jobs")],
        after="Name",
        add=("Status", "string", "", 0, "Status of the job."),
        Completions="The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    ("batch", "cronjobs"): _with(
        _V28[("batch", "cronjobs")],
        after="Schedule",
        add=(
            "Timezone",
            "string",
            "",
            0,
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
        ),
    ),
    ("coordination.k8s.io", "leases"): _with(
        _V28[("coordination.k8s.io", "leases")],
        Holder="holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
    ),
    ("storage.k8s.io", "csidrivers"): _with(
        _V28[("storage.k8s.io", "csidrivers")],
        PodInfoOnMount='podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. "csi.storage.k8s.io/pod.name": pod.Name "csi.storage.k8s.io/pod.namespace": pod.Namespace "csi.storage.k8s.io/pod.uid": string(pod.UID) "csi.storage.k8s.io/ephemeral": "true" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise "false"\n\n"csi.storage.k8s.io/ephemeral" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the "Persistent" and "Ephemeral" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn\'t support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.',
    ),
}
"""The columns of the newest release (1.32): those of 1.28, four kinds with a column more and a
few described anew. The printers fill these; :func:`columns_for` keeps the older ones' subset."""

_V32 = COLUMNS
COLUMNS_1_36: dict[tuple[str, str], tuple[Column, ...]] = {
    **COLUMNS,
    ("", "serviceaccounts"): tuple(c for c in _V32[("", "serviceaccounts")] if c[0] != "Secrets"),
    ("apps", "deployments"): _with(
        _V32[("apps", "deployments")],
        Up_to_date="Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        Available="Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
        Selector="Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
    ),
    ("apps", "replicasets"): _with(
        _V32[("apps", "replicasets")],
        Desired="Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        Current="Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        Ready="The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        Selector="Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
    ("apps", "daemonsets"): _with(
        _V32[("apps", "daemonsets")],
        Ready="numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        Selector="A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
    ("apps", "controllerrevisions"): _with(
        _V32[("apps", "controllerrevisions")],
        Revision="Revision indicates the revision of the state represented by Data.",
    ),
    ("discovery.k8s.io", "endpointslices"): _with(
        _V32[("discovery.k8s.io", "endpointslices")],
        AddressType='addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType "IPv4" and "IPv6". No semantics are defined for the "FQDN" type.',
        Ports="ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.",
    ),
    ("storage.k8s.io", "csidrivers"): _with(
        _V32[("storage.k8s.io", "csidrivers")],
        AttachRequired="attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.",
    ),
    ("", "resourcequotas"): tuple(
        _V32[("", "resourcequotas")][i] for i in (0, 2, 3, 1)
    ),  # Age last
}
"""The columns of 1.36: those of 1.32, ServiceAccounts without Secrets (the count of a field
deprecated since 1.32), ResourceQuotas' Age last, a few workloads', EndpointSlices',
ControllerRevisions' and CSIDrivers' columns described anew."""

_BY_RELEASE = {NEWEST: COLUMNS, OLDEST: COLUMNS_1_28, KUBE_1_36: COLUMNS_1_36}


def columns_for(key: tuple[str, str], version: KubeVersion = NEWEST) -> tuple[Column, ...]:
    """The columns of ``key`` (group, resource) as ``version`` prints them."""
    return _BY_RELEASE[version.table_columns][key]
