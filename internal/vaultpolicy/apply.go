package vaultpolicy

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
)

// Vault is what the job needs of Vault: read, write and list ACL policies and
// Kubernetes-auth roles. Nothing here deletes.
type Vault interface {
	// ReadPolicy returns the policy text Vault holds, or found false.
	ReadPolicy(ctx context.Context, name string) (text string, found bool, err error)
	WritePolicy(ctx context.Context, name, text string) error
	// ReadRole returns the role Vault holds, or found false.
	ReadRole(ctx context.Context, name string) (role Role, found bool, err error)
	WriteRole(ctx context.Context, name string, role Role) error
	ListPolicies(ctx context.Context) ([]string, error)
	ListRoles(ctx context.Context) ([]string, error)
}

// CallError is a Vault call that failed; the run stops at it.
type CallError struct {
	Call string // "read policy", "write role", "list policies", ...
	Name string // the policy or role, when the call has one
	Err  error
}

func (e *CallError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s: %v", e.Call, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Call, e.Name, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// Stale is a name Vault holds, of the render's form for a Project the render
// covers, that the render no longer names. It is reported, never deleted.
type Stale struct {
	Kind string // "policy" or "role"
	Name string
}

// Summary counts what one run did; each policy and each role counts once.
type Summary struct {
	Written   int
	Unchanged int
	Stale     []Stale
}

// Apply makes Vault hold the render: each identity's policy, then its role,
// written only where Vault holds something else. The first failing call stops
// the run; nothing after it is attempted. own is the role the job logs in as;
// a render that names it is refused before Vault is touched.
func Apply(ctx context.Context, v Vault, render Render, own string, log *slog.Logger) (Summary, error) {
	var sum Summary
	for _, e := range render.Entries {
		if e.Name() == own {
			// Rewritten, the job's own grant would be an identity's: the
			// run would lose it half way, and every run after it.
			return sum, fmt.Errorf("%w: %s is the role this job logs in as", ErrRefused, own)
		}
	}
	for _, e := range render.Entries {
		name := e.Name()
		text, found, err := v.ReadPolicy(ctx, name)
		if err != nil {
			return sum, &CallError{Call: "read policy", Name: name, Err: err}
		}
		if found && SamePolicy(text, e.Policy) {
			sum.Unchanged++
		} else {
			if err := v.WritePolicy(ctx, name, e.Policy.Encode()); err != nil {
				return sum, &CallError{Call: "write policy", Name: name, Err: err}
			}
			sum.Written++
			log.Info("wrote policy", slog.String("name", name), slog.Bool("created", !found))
		}

		role, found, err := v.ReadRole(ctx, name)
		if err != nil {
			return sum, &CallError{Call: "read role", Name: name, Err: err}
		}
		if found && SameRole(role, e.Role) {
			sum.Unchanged++
		} else {
			if err := v.WriteRole(ctx, name, e.Role); err != nil {
				return sum, &CallError{Call: "write role", Name: name, Err: err}
			}
			sum.Written++
			log.Info("wrote role", slog.String("name", name), slog.Bool("created", !found))
		}
	}

	policies, err := v.ListPolicies(ctx)
	if err != nil {
		return sum, &CallError{Call: "list policies", Err: err}
	}
	roles, err := v.ListRoles(ctx)
	if err != nil {
		return sum, &CallError{Call: "list roles", Err: err}
	}
	sum.Stale = FindStale(render, policies, roles, own)
	for _, s := range sum.Stale {
		log.Warn("stale: Vault holds it, the render no longer names it; left in place for a human",
			slog.String("kind", s.Kind), slog.String("name", s.Name))
	}
	return sum, nil
}

// FindStale picks, from the names Vault holds, those of the render's form
// whose Project the render covers and that the render does not name. Names of
// other Projects, names not of the form at all (Vault's own "default"), and
// own, the role the job logs in as and a policy of its name, are never
// reported: the platform may give its login a name of the render's form.
func FindStale(render Render, policies, roles []string, own string) []Stale {
	covered := render.Projects()
	named := map[string]bool{}
	for _, e := range render.Entries {
		named[e.Name()] = true
	}
	var out []Stale
	for _, group := range []struct {
		kind  string
		names []string
	}{{"policy", policies}, {"role", roles}} {
		names := slices.Clone(group.names)
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			id, err := ParseName(name)
			if err != nil || named[name] || name == own || !slices.Contains(covered, id.Project) {
				continue
			}
			out = append(out, Stale{Kind: group.kind, Name: name})
		}
	}
	return out
}
