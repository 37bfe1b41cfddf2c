package grants

import (
	"fmt"
	"slices"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// UserName is the name of a part's user: the part, and for an agent or a
// backup worker its node's key-safe name, so each node's users are its own.
func UserName(p Part, node string) (string, error) {
	if !PerNode(p) {
		return string(p), nil
	}
	token, err := bus.EncodeName(node)
	if err != nil {
		return "", fmt.Errorf("%w %s: %w", ErrPart, p, err)
	}
	return string(p) + "-" + token, nil
}

// Wanted is every user the fleet needs and what each may do: one of each
// part that runs once, and an agent and a backup worker for every node the
// registrations name.
func Wanted(nodes []string) (map[string]Permissions, error) {
	out := map[string]Permissions{}
	for _, p := range Parts {
		names := []string{""}
		if PerNode(p) {
			names = nodes
		}
		for _, node := range names {
			name, err := UserName(p, node)
			if err != nil {
				return nil, err
			}
			perms, err := For(p, node)
			if err != nil {
				return nil, err
			}
			out[name] = perms
		}
	}
	return out, nil
}

// Change is one difference between the users there are and the users
// wanted: a user to add, one whose permissions to change, or one to revoke.
type Change struct {
	User, What string
}

// The kinds of change.
const (
	Add    = "add"
	Amend  = "change"
	Revoke = "revoke"
)

func (c Change) String() string { return c.What + " " + c.User }

// Plan is what turns the users there are into the users wanted, by name:
// nothing when they agree. It is said before anything changes.
func Plan(have, want map[string]Permissions) []Change {
	var out []Change
	for name, perms := range want {
		got, ok := have[name]
		switch {
		case !ok:
			out = append(out, Change{User: name, What: Add})
		case !same(got, perms):
			out = append(out, Change{User: name, What: Amend})
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			out = append(out, Change{User: name, What: Revoke})
		}
	}
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.User, y.User) })
	return out
}

// same says two permissions allow the same, whatever the order of their
// subjects.
func same(x, y Permissions) bool {
	return x.Respond == y.Respond && sameSet(x.Pub, y.Pub) && sameSet(x.Sub, y.Sub)
}

func sameSet(x, y []string) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(x))), slices.Compact(slices.Sorted(slices.Values(y))))
}
