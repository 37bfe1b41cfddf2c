package grants

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// Folder is where the fleet's credentials files are kept, one per user,
// <user>.creds, mode 0600: what the operator hands each part as NATS_CREDS.
type Folder string

// Users reads every credentials file of the folder back by user name, with
// its public key; a file that is not a user's credentials is an error
// naming it, not a user to revoke.
func (f Folder) Users() (perms map[string]Permissions, keys map[string]string, err error) {
	paths, err := filepath.Glob(filepath.Join(string(f), "*.creds"))
	if err != nil {
		return nil, nil, err
	}
	perms, keys = map[string]Permissions{}, map[string]string{}
	for _, path := range paths {
		raw, err := os.ReadFile(path) //nolint:gosec // a credentials file of the folder the operator named
		if err != nil {
			return nil, nil, err
		}
		name, user, p, err := FromCreds(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if want := strings.TrimSuffix(filepath.Base(path), ".creds"); name != want {
			return nil, nil, fmt.Errorf("%s: holds the user %q", path, name)
		}
		perms[name], keys[name] = p, user
	}
	return perms, keys, nil
}

// Apply carries out plan: a new key and credentials file for each user to
// add or change, then, when any key is to go (a user revoked, or a changed
// user's old key), the account with those keys revoked pushed to the
// resolver, then the revoked users' files removed. revoked is every key
// revoked before; the answer is every key revoked now, to keep for the
// next run. A push refused leaves the files of the users to revoke.
func Apply(ctx context.Context, auth Authority, folder Folder, plan []Change, want map[string]Permissions,
	keys map[string]string, revoked []string, resolver Requester, now time.Time) ([]string, error) {
	var going []string
	for _, c := range plan {
		if c.What == Revoke || c.What == Amend {
			going = append(going, keys[c.User])
		}
		if c.What == Revoke {
			continue
		}
		if err := folder.write(auth, c.User, want[c.User]); err != nil {
			return revoked, err
		}
	}
	if len(going) == 0 {
		return revoked, nil
	}
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(revoked), going...))))
	account, err := auth.AccountJWT(all, now)
	if err != nil {
		return revoked, err
	}
	if err := Push(ctx, resolver, account); err != nil {
		return revoked, err
	}
	var errs []error
	for _, c := range plan {
		if c.What == Revoke {
			if err := os.Remove(folder.path(c.User)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return all, errors.Join(errs...)
}

func (f Folder) path(user string) string { return filepath.Join(string(f), user+".creds") }

// write makes user a new key and its credentials file, written whole under
// another name and renamed, so a part never reads half a file.
func (f Folder) write(auth Authority, user string, perms Permissions) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	token, err := auth.UserJWT(user, pub, perms)
	if err != nil {
		return err
	}
	creds, err := Creds(token, seed)
	if err != nil {
		return err
	}
	tmp := f.path(user) + ".new"
	if err := os.WriteFile(tmp, creds, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.path(user))
}

// WriteOperator writes the operator's own user, name.creds: it may do
// anything in the account, for a put, a hand want, compose and grants.
func (f Folder) WriteOperator(auth Authority, name string) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	token, err := auth.OperatorUserJWT(pub)
	if err != nil {
		return err
	}
	creds, err := Creds(token, seed)
	if err != nil {
		return err
	}
	tmp := f.path(name) + ".new"
	if err := os.WriteFile(tmp, creds, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.path(name))
}
