"""What each tool tells the model: when to call it, what its answers mean, what not to do.

Written for an agent that must not commit dependent state (ship goods, credit an account,
tell the next service "done") before a settlement is final. Kept here, apart from the code,
so the wording can be read and reviewed as a whole.
"""

from __future__ import annotations

INSTRUCTIONS = """\
Finality Watcher follows blockchain transactions (and payments, jobs) from "accepted" to
"final", through reorgs, reverts and timeouts, and signs a receipt for every decision.
Use it before acting on a settlement: register it, then call may_commit (or
wait_for_finality) and act only on its decision. A transaction hash returned by a wallet,
or a receipt with status 1, is NOT final: the block can still be reorganised away.
Never commit dependent state before may_commit answers COMMIT; on DISCARD, undo or drop the
prepared state; on WAIT, do nothing yet and ask again (at the latest by `until`)."""

REGISTER_PAYMENT = """\
Start watching a payment to an address when no tx hash is known in advance: `amount` base
units (wei, or token units; a decimal string) of `asset` ("native" or an ERC-20 contract) to
`to` on `chain`, optionally only `from` one sender. It becomes FINALITY_CONFIRMED once final
transfers add up to the amount; the view shows `transfers`, `paid`, `remaining`, `overpaid`.
Every call is a new payment unless `reference` (an order id) repeats. A partial payment at
the deadline is TIMEOUT_TREATED_AS_FAILURE: refunding what was paid is yours. Keep the
settlement_id and call may_commit or wait_for_finality before shipping."""

CREATE_INVOICE = """\
Create an invoice: the daemon derives a fresh address (never used before) from its
configured extended public key and watches it for `amount` base units (a decimal string) of
`asset` ("native" or an ERC-20 contract) on `chain` until `expires_in_s`. Give the payer
`address` or `payment_uri` (an EIP-681 ethereum: URI a wallet opens). Keep `invoice_id`; its
`state` goes new -> processing (paid in full, not final) -> settled (final, with a receipt),
or expired, paid_partial, paid_over, paid_late, invalid. Ship only when `state` is settled or
paid_over."""

GET_INVOICE = """\
An invoice's current view: `state` (new, processing, settled, paid_partial, paid_over,
expired, paid_late, invalid), the payment's `verdict`, `transfers`, `paid`, `remaining`,
`address`, `payment_uri`, `expires_at`. Its receipt is its settlement's (settlement_id)."""

REGISTER = """\
Start watching a settlement and get its current view. For an EVM transaction give `chain`
(a chain name the daemon knows, e.g. "local", "mainnet") and `tx_hash` (0x + 64 hex digits);
`confirmations` overrides the chain's required depth, `timeout_s` the time after which a
settlement that is still not final is treated as failed. Pass `dependent_state` (any JSON:
the commit you prepared) to have the daemon hold it and deliver it exactly once to
`commit_url` on finality (or a discard on failure); the view then carries `binding`, a
signed receipt binding that state to the settlement. For payments and jobs give `kind`
("stripe_payment_intent", "rq_job", "celery_task"), `ref` and optionally `source` instead
of chain/tx_hash. Registering the same settlement again returns the same settlement_id.
The view's `verdict` is AWAITING_FINALITY right after broadcast: that is not permission to
act. Keep the returned settlement_id and call may_commit or wait_for_finality."""

GET = """\
The current view of a registered settlement by its settlement_id: verdict, depth
(`confirmations` of `required_confirmations`), block, reorg_count, deadline, and the signed
`receipt` once terminal. Verdicts: AWAITING_FINALITY (wait), FINALITY_CONFIRMED (final),
SETTLEMENT_FAILED (reverted, replaced or dropped), TIMEOUT_TREATED_AS_FAILURE (not final
by its deadline), NO_SETTLEMENT (not seen on chain). For a yes/no answer use may_commit."""

CHECK = """\
The view of any transaction by chain and hash, registered or not (an unregistered hash is
looked up live on the node and not watched afterwards). Use it to inspect; use
register_settlement to have a settlement followed and decided."""

WAIT = """\
Wait until a registered settlement is terminal, up to `timeout_s` seconds (default 60,
at most 3600), sending progress notifications (verdict, depth, reorgs) while it waits.
Returns the settlement view: terminal (FINALITY_CONFIRMED, SETTLEMENT_FAILED or
TIMEOUT_TREATED_AS_FAILURE) or, when `timeout_s` runs out first, the current view (still
AWAITING_FINALITY; this is not an error; call again to keep waiting). Then call may_commit
for the decision and its receipt."""

MAY_COMMIT = """\
The decision an agent acts on, for a registered settlement. Answers
{"decision", "verdict", "directive", "receipt"}:
- COMMIT: the settlement is final (FINALITY_CONFIRMED); `receipt` is the signed finality
  receipt. Now, and only now, commit the dependent state; keep the receipt as proof.
- WAIT: not final yet; `why` says what is missing (inclusion, depth, a receipt being signed)
  and `until` is the deadline (unix milliseconds) after which the settlement times out
  and the decision becomes DISCARD. Do not commit anything; ask again later.
- DISCARD: the settlement failed (reverted, replaced, dropped) or timed out; `receipt` is
  the signed failure or timeout receipt. Do not commit; undo or drop the prepared state.
COMMIT and DISCARD are final answers; WAIT never is."""

VERIFY = """\
Check a signed receipt offline (no daemon, no network): its signature, digest and the proof
it carries. Pass the receipt document exactly as may_commit returns it (or as
GET /v1/settlements/{id}/receipt serves it); `signer` (0x address) accepts only that
signer. Answers {"valid": true, "kind", "settlement_id", "chain_id", "tx_hash", "signer",
"digest"} or {"valid": false, "reason": "..."}: a tampered receipt or a wrong signer is an
answer, not an error. Trust a receipt only if it is valid AND its signer is one you expect."""
