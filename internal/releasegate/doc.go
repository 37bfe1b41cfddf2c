// Package releasegate answers Flagger's webhooks for every gated Application
// from the live cluster: may a member's new copy start, does it pass an
// analysis iteration, may it be promoted (the barrier), and must it be rolled
// back. It reads what it needs when it is asked, and fails closed. Between
// questions its rounds (Reconciler) record what serves, start and undo
// migrations and warm revisions up. What a release is, as the gate, the
// Reporter and the demo all read it, is internal/release.
package releasegate
