"""A kopf operator of Gadgets (``operators.example.com/v1``), run unmodified by
``tests/e2e/test_operators.py`` straight against the API server and through the daemon.

Each handler posts one Event (``kopf.info``) and returns a dict that kopf writes into the
object's status under the handler's name; the delete handler makes kopf add its finalizer to
every Gadget and remove it once the handler has run. It handles only the Gadgets labelled
``world: $GADGETS_WORLD``, so that two of them watching all namespaces leave each other's alone.
"""

from __future__ import annotations

from typing import Any

import kopf

GROUP, VERSION, PLURAL = "operators.example.com", "v1", "gadgets"


@kopf.on.create(GROUP, VERSION, PLURAL)
def created(body: kopf.Body, spec: kopf.Spec, name: str, **_: Any) -> dict[str, Any]:
    kopf.info(body, reason="Built", message=f"built {name} of size {spec.get('size')}")
    return {"size": spec.get("size"), "phase": "built"}


@kopf.on.update(GROUP, VERSION, PLURAL)
def resized(body: kopf.Body, old: Any, new: Any, name: str, **_: Any) -> dict[str, Any]:
    before, after = old["spec"].get("size"), new["spec"].get("size")
    kopf.info(body, reason="Resized", message=f"resized {name} from {before} to {after}")
    return {"from": before, "to": after}


@kopf.on.delete(GROUP, VERSION, PLURAL)
def scrapped(body: kopf.Body, name: str, **_: Any) -> None:
    kopf.info(body, reason="Scrapped", message=f"scrapped {name}")
