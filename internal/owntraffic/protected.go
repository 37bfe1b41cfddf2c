package owntraffic

import (
	"context"
	"fmt"
)

// Protected requests path at base once, with no credentials and no redirect
// followed, and decides whether the release may pass: a path a Client's
// sign-in protects must not be served to anyone. A path that CheckPath
// refuses or a base that is not an http origin is an error before any
// request; so is ctx ending first.
func (p *Sender) Protected(ctx context.Context, base, process, path string) (Verdict, error) {
	origin, err := checkBase(base)
	if err != nil {
		return Verdict{}, err
	}
	if err := CheckPath(path); err != nil {
		return Verdict{}, err
	}
	a := get(ctx, p.client, p.timeout, origin.String()+path)
	if err := ctx.Err(); err != nil {
		return Verdict{}, fmt.Errorf("protected path on %s: %w", origin.Host, err)
	}
	a.Path = path
	return ProtectedVerdict(process, a), nil
}

// ProtectedVerdict decides from the anonymous request's answer: a 2xx holds
// the release (E_CLIENT_OPEN), no answer holds it, and any other answer — a
// 401, a 403 or a redirect to sign in — passes.
func ProtectedVerdict(process string, a Answer) Verdict {
	switch {
	case a.Status == 0:
		return Verdict{Reason: fmt.Sprintf("%s did not answer %s (%s), so it is not shown protected", process, a.Path, a.Cause)}
	case a.Status >= 200 && a.Status < 300:
		return Verdict{Reason: fmt.Sprintf("E_CLIENT_OPEN: %s serves %s to anyone", process, a.Path)}
	default:
		return Verdict{Pass: true, Reason: fmt.Sprintf("%s answers %s with %d", process, a.Path, a.Status)}
	}
}
