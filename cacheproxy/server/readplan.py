"""What a read is answered from: the API server's resourceVersion rules (docs/design.md §4) and
the consistency modes, in one pure function.

:func:`plan` takes what a get, list or watch asks (:class:`ReadRequest`), the state of its
resource (:class:`ReadState`) and what was done for this read so far (:class:`ReadProgress`), and
says the next step: serve from the cache (its current state, or the state at an older RV), wait
until the cache reaches an RV, ask upstream's current RV (a probe), confirm the cache against
upstream (a listing, or a get's object), forward the read upstream as its caller, or refuse it.
It does no I/O; :func:`.readexec.decide` carries the steps out and asks again until the
answer is to serve, forward or refuse.

The rows, in the order they are decided:

| request | answered |
|---|---|
| ``continue`` at the cache's RV / older, still in the event log | that state |
| ``continue`` older than the event log | 410, with a token to go on at the latest state |
| ``continue`` newer than the cache (upstream's page, a replica ahead) | forward; else wait ``rv_wait``, then that 410 |
| RV=N, ``Exact`` (or a ``limit`` without a match) | the state at N; 410 when too old; wait when newer |
| RV=N, not older than, reached | the current state |
| RV=N, not older than, not reached | wait ``catch_up``, then forward as asked (upstream applies its own rule: the state at N or newer, or its 504); a list: or confirm; else wait ``rv_wait``, then 504 |
| watch from RV=N (no initial events) | the watch (its events come as the cache gets them) |
| RV="0" | the current state, as it is |
| RV unset (or an inconsistent ``continue``): | "Most Recent", by the resource's mode: |
| … mode ``cache`` | the current state, as it is |
| … ``live``, a write through this daemon not in the cache yet | wait for it first (its window) |
| … ``live``, upstream's watch live | the current state (stale by the watch's lag at most) |
| … ``strict``, or ``live`` with the watch down | a proof: see below |

A proof: a get is forwarded when it can be (upstream answers it at the cost of the read itself);
otherwise a shared probe learns upstream's RV, and the cache serves once it reached it (waiting
``catch_up`` for its events). A list whose cache stays behind (a quiet resource: its RV moves only
with its own events, upstream's with every write) is forwarded, or confirmed (a listing of the
collection; a get: its object's RV) when it cannot be. A resource found quiet that has not moved
since skips the probe (a cost heuristic: such a read is still forwarded or confirmed). When
upstream cannot be asked or the cache does not catch up in time,
``on_timeout`` says: served as it is with a ``Warning``, or 504. Watches are never forwarded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from cacheproxy.kube.listoptions import EXACT, ListOptions
from cacheproxy.kube.rv import decode_continue
from cacheproxy.kube.status import bad_request
from cacheproxy.kube.versions import NEWEST, KubeVersion

__all__ = [
    "MODES",
    "Confirm",
    "ForwardRead",
    "Probe",
    "ReadMode",
    "ReadProgress",
    "ReadRequest",
    "ReadState",
    "Refuse",
    "Serve",
    "Step",
    "WaitFor",
    "plan",
]

ReadMode = Literal["live", "strict", "cache"]
MODES: Final[tuple[ReadMode, ...]] = ("live", "strict", "cache")
Verb = Literal["get", "list", "watch"]


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What a read asks, as far as its resourceVersion goes."""

    verb: Verb
    resource_version: str = ""
    """As sent: "" (unset), "0" or a decimal RV."""
    exact: bool = False
    """The state at exactly that RV: ``resourceVersionMatch=Exact``, or a list with a ``limit``
    and an RV but no match (the API server's legacy rule)."""
    continue_rv: int | None = None
    """The continue token's RV (-1: continue at the latest state); None: no token."""
    initial_events: bool = False
    """A watch that starts with its initial state (``sendInitialEvents=true``)."""

    @classmethod
    def of(cls, verb: Verb, opts: ListOptions, *, kube: KubeVersion = NEWEST) -> ReadRequest:
        """A list or watch request (a bad continue token: the API server's 400, in ``kube``'s
        words)."""
        continue_rv = None
        if opts.continue_token:
            continue_rv = decode_continue(opts.continue_token, kube=kube).resource_version
            if opts.resource_version not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
        rv = opts.resource_version
        exact = verb == "list" and (
            opts.resource_version_match == EXACT
            or (opts.limit > 0 and rv not in ("", "0") and not opts.resource_version_match)
        )
        return cls(
            verb,
            rv,
            exact=exact,
            continue_rv=continue_rv,
            initial_events=bool(opts.send_initial_events),
        )

    @property
    def rv(self) -> int:
        return int(self.resource_version) if self.resource_version.isdigit() else 0

    @property
    def most_recent(self) -> bool:
        """RV unset (or a continue at the latest state): the API server's consistent read."""
        return not self.resource_version and self.continue_rv in (None, -1)


@dataclass(frozen=True, slots=True)
class ReadState:
    """The read's resource now, and what its configuration allows."""

    resource_version: int
    oldest: int = 0
    """The oldest RV whose state the event log can still rebuild."""
    mode: ReadMode = "live"
    watch_live: bool = True
    """Upstream's watch of the resource is open (or re-opening after a normal end): the cache is
    behind upstream by the watch's delivery lag at most."""
    written: int = 0
    """The newest RV a write through this daemon returned, while reads wait for it (0: none)."""
    write_wait: float = 1.0
    """How long a read may wait for that write to reach the cache."""
    quiet: bool = False
    """A read found the cache behind upstream's RV and no object has changed since."""
    can_forward: bool = False
    """This read may be forwarded upstream as its caller (pass-through on, an identity to send)."""
    can_confirm: bool = False
    """Upstream can be asked to confirm the cache (a listing; a get's object)."""
    on_timeout: Literal["cache", "error"] = "cache"
    catch_up: float = 0.1
    """How long to wait for the cache's events before proving otherwise (forward or confirm)."""
    rv_wait: float = 3.0
    """How long a read at an RV the cache has not reached waits, when nothing else can answer."""


@dataclass(frozen=True, slots=True)
class ReadProgress:
    """What was done for the read so far (:func:`.readexec.decide` fills it in)."""

    probed: int | None = None
    """Upstream's RV, from a probe that started after the read came."""
    waited: bool = False
    """A wait for an RV (other than for a write through this daemon) ran out."""
    waited_for_write: bool = False
    """The wait for a write through this daemon ran out (its event is not coming: another
    collection's object, or a lagging watch)."""
    confirmed: bool | None = None
    """A confirmation was tried: whether it confirmed the cache."""
    failed: str | None = None
    """Why upstream could not be asked or the cache did not catch up in time."""


@dataclass(frozen=True, slots=True)
class Serve:
    """Answer from the cache: its current state, or the state at ``at`` (an older RV)."""

    at: int | None = None
    warning: str | None = None
    """Served as it is though a proof failed: why (a ``Warning`` header says it)."""


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Wait until the cache reached ``rv``, for ``within`` seconds at most (None: as long as
    the read may take); then ask again."""

    rv: int
    within: float | None = None
    write: bool = False
    """The wait is for a write through this daemon (read-your-writes)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """Learn upstream's current RV (a probe shared by the reads waiting for it)."""


@dataclass(frozen=True, slots=True)
class Confirm:
    """Confirm the cache against upstream now: a listing of the collection (at least at
    ``target``), or for a get its object's resourceVersion."""

    target: int = 0


@dataclass(frozen=True, slots=True)
class ForwardRead:
    """Pass the read through to upstream as its caller, exactly as asked: its resourceVersion
    options too, so that upstream applies its own rule (an RV it has not reached either waits,
    then 504 ``ResourceVersionTooLarge``, as a direct read would)."""


RefuseReason = Literal["expired", "continue_expired", "too_large", "timeout"]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer with the API server's error: 410 ``expired`` (or ``continue_expired``, with a
    token to continue at the latest state), 504 ``too_large`` (an RV the cache did not reach in
    time), 504 ``timeout`` (a consistent read not proven in time, ``on_timeout: error``)."""

    reason: RefuseReason
    rv: int = 0
    why: str = ""


Step = Serve | WaitFor | Probe | Confirm | ForwardRead | Refuse

CURRENT: Final = Serve()


def plan(read: ReadRequest, state: ReadState, done: ReadProgress | None = None) -> Step:
    """The next step for ``read`` (see the module's table)."""
    done = done or ReadProgress()
    rv = state.resource_version
    token = read.continue_rv
    if token is not None and token != -1:
        if token == rv:
            return CURRENT
        if token < rv:
            return Serve(at=token) if token >= state.oldest else Refuse("continue_expired")
        # A token from upstream (a page it answered: etcd's revision, which this resource's
        # cache may never reach) or from a replica ahead: its state is not here. Upstream
        # continues the walk at that RV; without it, wait for the state as for RV=N.
        if state.can_forward:
            return ForwardRead()
        return Refuse("continue_expired") if done.waited else WaitFor(token, state.rv_wait)
    if read.rv > 0:
        return _at(read, state, done)
    if read.resource_version == "0" or state.mode == "cache":
        return CURRENT
    if state.mode == "live":
        if state.written > rv and not done.waited_for_write:
            return WaitFor(state.written, state.write_wait, write=True)
        if state.watch_live:
            return CURRENT
    return _proof(read, state, done)


def _at(read: ReadRequest, state: ReadState, done: ReadProgress) -> Step:
    """A read at RV=N."""
    n, rv = read.rv, state.resource_version
    if read.exact:
        if n == rv:
            return CURRENT
        if n < rv:
            return Serve(at=n) if n >= state.oldest else Refuse("expired")
    elif n <= rv or (read.verb == "watch" and not read.initial_events):
        # A plain watch from a newer RV waits for its events (clients behind several replicas
        # rely on that); a watch-list's initial state must be that fresh.
        return CURRENT
    forward = state.can_forward and read.verb != "watch"
    confirm = state.can_confirm and read.verb != "get" and not read.exact
    if not done.waited:
        return WaitFor(n, state.catch_up if forward or confirm else state.rv_wait)
    if forward:
        return ForwardRead()
    if confirm and done.confirmed is None and done.failed is None:
        return Confirm(n)
    if done.confirmed:
        return CURRENT
    return Refuse("too_large", n)


def _proof(read: ReadRequest, state: ReadState, done: ReadProgress) -> Step:
    """A "Most Recent" read the cache must prove itself fresh for, or pass on."""
    forward = state.can_forward and read.verb != "watch"
    if done.failed is not None:
        return _fallback(state, done.failed)
    if forward and (read.verb == "get" or state.quiet):
        return ForwardRead()
    if done.confirmed:
        return CURRENT
    if done.confirmed is False:
        return _fallback(state, "upstream did not confirm the cache")
    if done.probed is None:
        if state.quiet and state.can_confirm:
            return Confirm()
        return Probe()
    if state.resource_version >= done.probed:
        return CURRENT
    if not done.waited:
        later = forward or state.can_confirm
        return WaitFor(done.probed, state.catch_up if later else None)
    if forward:
        return ForwardRead()
    if state.can_confirm:
        return Confirm(done.probed)
    return _fallback(
        state,
        f"the cache is at resourceVersion {state.resource_version}, upstream at {done.probed}",
    )


def _fallback(state: ReadState, why: str) -> Step:
    if state.on_timeout == "error":
        return Refuse("timeout", why=why)
    return Serve(warning=why)
