"""Whose clock is off: the senders whose envelopes were off this peer's clock, each said once,
and whether the others agree that it is this peer's own clock (`SkewWitnesses`).

A witness is a sender proven by a member's key: a request on a signed route
(`signer.SIGNED_ROUTES`) whose signature checked out against a live member, counted under that
member's id. The sender an envelope names is bound by the swarm secret's tag, but any holder
of the secret may write any name: counted as witnesses, two made-up names off by the same
amount read as two members agreeing, and a peer said that its own clock was most likely off.
Unproven names are still said (its address is how an operator finds the peer to fix), but
only the first `UNPROVEN_SAID` of them: made-up names cannot fill the table that lets the
proven ones be said, nor the log. An answer names no sender (its request named the
receiver): it is no witness, and is said at DEBUG only.
"""

from __future__ import annotations

import logging

PROVEN_SENDERS = 256  # member keys whose clock skew is remembered, at most
UNPROVEN_SAID = 32  # names not proven by a key said at WARNING, at most (then at DEBUG)
AGREE_S = 5.0  # two witnesses off by this much or less are off by "the same" amount

log = logging.getLogger(__name__)


class SkewWitnesses:
    """The clock-skew bookkeeping of one `Signer` (one per peer, like its replay guard)."""

    def __init__(self) -> None:
        self.proven: dict[str, float] = {}  # member id (its key signed) -> its skew, seconds
        self.said: dict[str, bool] = {}  # name said at WARNING -> whether a key proved it
        self._kept = {True: 0, False: 0}  # names said, proven and not (a count, not a scan)
        self.said_own_clock = False

    def saw(
        self, text: str, route: str, skew: float, *, tolerated: bool, named: str, signed_by: str,
        answer: bool = False,
    ) -> None:  # fmt: skip
        """An envelope `skew` seconds off this peer's clock (`text`: that in plain words),
        from the sender `named`, proven by the key of member `signed_by` ("" when none)."""
        if answer:
            log.debug("%s (an answer)", text)
            return
        if self._first_said(named, bool(signed_by)):
            fate = "taken" if tolerated else "refused until the clocks agree"
            log.warning("%s: its messages (/v1/%s first) are %s", text, route, fate)
        if signed_by and self._new_witness(signed_by, skew):
            self._judge_own_clock(skew)

    def _first_said(self, named: str, proven: bool) -> bool:
        """Whether `named` is to be said now: once each; a proven name while fewer than
        `PROVEN_SENDERS` proven ones were, an unproven one while fewer than `UNPROVEN_SAID`."""
        if named in self.said:
            return False
        if self._kept[proven] >= (PROVEN_SENDERS if proven else UNPROVEN_SAID):
            return False
        self.said[named] = proven
        self._kept[proven] += 1
        return True

    def _new_witness(self, member: str, skew: float) -> bool:
        if member in self.proven or len(self.proven) >= PROVEN_SENDERS:
            return False
        self.proven[member] = skew
        return True

    def _judge_own_clock(self, skew: float) -> None:
        """Once: two members' keys or more, off this peer by the same amount, and this peer's
        clock is the one most likely off."""
        agree = [s for s in self.proven.values() if abs(s - skew) <= AGREE_S]
        if len(agree) < 2 or self.said_own_clock:
            return
        self.said_own_clock = True
        log.warning(
            "this peer's clock is most likely off: %d members' clocks are %.0f s %s it",
            len(agree),
            abs(skew),
            "behind" if skew > 0 else "ahead of",
        )
