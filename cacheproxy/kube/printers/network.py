"""Networking: services, endpoints, endpoint slices, ingresses."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cacheproxy.kube.printers.cells import (
    NONE,
    UNKNOWN,
    Obj,
    age,
    as_int,
    as_list,
    dig,
    format_labels,
    name_of,
)


def _load_balancer_ips(svc: Obj) -> list[str]:
    found: set[str] = set()
    for ingress in as_list(dig(svc, "status", "loadBalancer", "ingress")):
        if not isinstance(ingress, Mapping):
            continue
        if ingress.get("ip"):
            found.add(str(ingress["ip"]))
        elif ingress.get("hostname"):
            found.add(str(ingress["hostname"]))
    return sorted(found)


def service_external_ip(svc: Obj) -> str:
    """``getServiceExternalIP`` (wide: load-balancer addresses are not truncated)."""
    spec = svc.get("spec") or {}
    svc_type = spec.get("type")
    external = [str(ip) for ip in as_list(spec.get("externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) or NONE
    if svc_type == "LoadBalancer":
        addresses = _load_balancer_ips(svc) + external
        return ",".join(addresses) or "<pending>"
    if svc_type == "ExternalName":
        return str(spec.get("externalName") or "")
    return UNKNOWN


def service_ports(ports: Any) -> str:
    """``makePortString``: ``port/proto`` or ``port:nodePort/proto``, comma-separated."""
    pieces: list[str] = []
    for port in as_list(ports):
        protocol = port.get("protocol") or ""
        node_port = as_int(port.get("nodePort"))
        if node_port > 0:
            pieces.append(f"{as_int(port.get('port'))}:{node_port}/{protocol}")
        else:
            pieces.append(f"{as_int(port.get('port'))}/{protocol}")
    return ",".join(pieces)


def print_service(svc: Obj, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    cluster_ips = as_list(spec.get("clusterIPs"))
    return [
        name_of(svc),
        str(spec.get("type") or ""),
        str(cluster_ips[0]) if cluster_ips else NONE,
        service_external_ip(svc),
        service_ports(spec.get("ports")) or NONE,
        age(svc, now),
        format_labels(spec.get("selector")),
    ]


def _host_port(ip: str, port: int) -> str:
    """Go's ``net.JoinHostPort``: IPv6 addresses in brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def format_endpoints(subsets: Any, limit: int = 3) -> str:
    """``formatEndpoints``: up to three ``ip:port`` (bare IPs for port-less subsets), then
    ``+ N more...``; ``<none>`` without subsets. Not-ready addresses are not shown."""
    if not as_list(subsets):
        return NONE
    shown: list[str] = []
    count = 0
    more = False
    for subset in as_list(subsets):
        addresses = [str(a.get("ip", "")) for a in as_list(subset.get("addresses"))]
        ports = as_list(subset.get("ports"))
        if not ports:
            count += len(addresses)
            for ip in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(ip)
            continue
        for port in ports:
            count += len(addresses)
            for ip in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(_host_port(ip, as_int(port.get("port"))))
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


def print_endpoints(ep: Obj, now: datetime) -> list[Any]:
    return [name_of(ep), format_endpoints(ep.get("subsets")), age(ep, now)]


def _ingress_hosts(rules: Any, limit: int = 3) -> str:
    """``formatHosts``: up to three hosts then ``+ N more...`` (N counts rules), ``*`` if none."""
    rules = as_list(rules)
    shown: list[str] = []
    more = False
    for rule in rules:
        if len(shown) == limit:
            more = True
        host = rule.get("host") if isinstance(rule, Mapping) else None
        if not more and host:
            shown.append(str(host))
    if not shown:
        return "*"
    text = ",".join(shown)
    return f"{text} + {len(rules) - limit} more..." if more else text


def _ingress_address(ingress: Obj) -> str:
    """``ingressLoadBalancerStatusStringer`` (wide): IPs, else hostnames, sorted and unique."""
    found = set()
    for entry in as_list(dig(ingress, "status", "loadBalancer", "ingress")):
        if entry.get("ip"):
            found.add(str(entry["ip"]))
        elif entry.get("hostname"):
            found.add(str(entry["hostname"]))
    return ",".join(sorted(found))


def print_ingress(ingress: Obj, now: datetime) -> list[Any]:
    spec = ingress.get("spec") or {}
    class_name = spec.get("ingressClassName")
    return [
        name_of(ingress),
        NONE if class_name is None else str(class_name),
        _ingress_hosts(spec.get("rules")),
        _ingress_address(ingress),
        "80, 443" if as_list(spec.get("tls")) else "80",
        age(ingress, now),
    ]


def _list_with_more(items: list[str], count: int, most: int = 3) -> str:
    """``listWithMoreString``: the first ``most`` items, ``+ N more...`` past them, ``<unset>``
    for none."""
    text = ",".join(items[:most])
    if count > most:
        return f"{text} + {count - most} more..."
    return text or "<unset>"


def print_endpointslice(slice_: Obj, now: datetime) -> list[Any]:
    """``printEndpointSlice``: ports by number (else name, else ``<unset>``) and addresses, three
    of each at most (``formatDiscoveryPorts``, ``formatDiscoveryEndpoints``)."""
    ports = [
        str(p["port"]) if isinstance(p.get("port"), int) else str(p.get("name") or "<unset>")
        for p in as_list(slice_.get("ports"))
        if isinstance(p, Mapping)
    ]
    addresses = [
        str(address)
        for endpoint in as_list(slice_.get("endpoints"))
        if isinstance(endpoint, Mapping)
        for address in as_list(endpoint.get("addresses"))
    ]
    return [
        name_of(slice_),
        str(slice_.get("addressType", "")),
        _list_with_more(ports, len(ports)),
        _list_with_more(addresses, len(addresses)),
        age(slice_, now),
    ]
