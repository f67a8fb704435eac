"""A controller in ten lines: every ConfigMap labelled ``example.com/greet=yes`` gets a greeting.

From the clone (after ``make run`` or ``make test`` made ``.venv``), against the cluster your
kubeconfig points at (or in a pod, its own)::

    .venv/bin/python examples/controller.py
    kubectl create configmap hello && kubectl label configmap hello example.com/greet=yes
    kubectl get configmap hello -o jsonpath='{.data.greeting}'      # hello hello
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from cacheproxy.controller import Controller, InformerFactory

MERGE = {"Content-Type": "application/merge-patch+json"}


async def main(kubeconfig: str | None = None) -> None:
    async with InformerFactory.from_kubeconfig(kubeconfig) as factory:
        configmaps = factory.informer("configmaps", labels="example.com/greet=yes")

        async def reconcile(key: str, cm: dict[str, Any] | None) -> None:
            if cm is None or "greeting" in (cm.get("data") or {}):
                return  # gone, or greeted already: nothing to do
            ns, name = key.split("/")
            patch = {"data": {"greeting": f"hello {name}"}}
            path = f"/api/v1/namespaces/{ns}/configmaps/{name}"
            (await factory.client.patch(path, json=patch, headers=MERGE)).raise_for_status()
            print(f"greeted {key}", flush=True)

        await Controller(configmaps, reconcile, workers=4).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", help="default: in-cluster, $KUBECONFIG or ~/.kube/config")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the informers stop, then exit
        asyncio.run(main(args.kubeconfig))
