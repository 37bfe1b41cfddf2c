package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
)

// The files of the keys folder: the three seeds the trust is made of, the
// JWTs the server is configured with, and every user key revoked so far.
const (
	operatorSeed = "operator.nk"
	accountSeed  = "account.nk"
	systemSeed   = "system.nk"
	revokedFile  = "revoked"
)

func grantsCommand(in cli.Env) *cobra.Command {
	var keys, creds string
	var dryRun, initKeys bool
	c := &cobra.Command{
		Use:   "grants --keys DIR (--init | --creds DIR [--dry-run])",
		Short: "Give every part its own least credential on the bus, from the registrations",
		Long: "mesh grants --init makes the operator, account and system keys in DIR (never over one there) and\n" +
			"writes operator.jwt, system.jwt and account.jwt for the server's operator mode. Without --init it\n" +
			"reads the registrations (as the operator, NATS_CREDS), says each user to add, change or revoke,\n" +
			"writes a credentials file per part into --creds and pushes the account revoking what goes to the\n" +
			"server's resolver. --dry-run says and changes nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keys == "" || !initKeys && creds == "" {
				return errors.New("name --keys and, without --init, --creds")
			}
			if initKeys {
				return grantsInit(in, keys)
			}
			return grantsRun(cmd.Context(), in, keys, grants.Folder(creds), dryRun)
		},
	}
	c.Flags().StringVar(&keys, "keys", "", "the folder of the operator's, the account's and the system account's seeds")
	c.Flags().StringVar(&creds, "creds", "", "the folder of the parts' credentials files, <user>.creds")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, change nothing")
	c.Flags().BoolVar(&initKeys, "init", false, "make the keys and the server's JWTs")
	return c
}

// grantsInit makes the seeds that are not there and writes the JWTs the
// server trusts from them.
func grantsInit(in cli.Env, dir string) error {
	for _, s := range []struct {
		file string
		make func() (nkeys.KeyPair, error)
	}{{operatorSeed, nkeys.CreateOperator}, {accountSeed, nkeys.CreateAccount}, {systemSeed, nkeys.CreateAccount}} {
		path := filepath.Join(dir, s.file)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		kp, err := s.make()
		if err == nil {
			var seed []byte
			if seed, err = kp.Seed(); err == nil {
				err = writeWhole(path, seed)
			}
		}
		if err != nil {
			return fail(in, 1, "no key made", fmt.Errorf("%s: %w", path, err))
		}
	}
	auth, err := loadAuthority(dir)
	if err != nil {
		return fail(in, 2, "bad configuration", err)
	}
	revoked, err := loadRevoked(dir)
	if err != nil {
		return fail(in, 2, "bad configuration", err)
	}
	for _, j := range []struct {
		file string
		make func() (string, error)
	}{
		{"operator.jwt", auth.OperatorJWT},
		{"system.jwt", auth.SystemJWT},
		{"account.jwt", func() (string, error) { return auth.AccountJWT(revoked, in.Now()) }},
	} {
		token, err := j.make()
		if err == nil {
			err = writeWhole(filepath.Join(dir, j.file), []byte(token))
		}
		if err != nil {
			return fail(in, 1, "no JWT written", fmt.Errorf("%s: %w", j.file, err))
		}
	}
	op, _ := auth.Operator.PublicKey()
	fmt.Fprintf(in.Stdout, "operator %s: configure the server with %s, system.jwt and account.jwt\n", op, filepath.Join(dir, "operator.jwt"))
	return nil
}

func grantsRun(ctx context.Context, in cli.Env, dir string, folder grants.Folder, dryRun bool) error {
	auth, err := loadAuthority(dir)
	if err != nil {
		return fail(in, 2, "bad configuration", err)
	}
	revoked, err := loadRevoked(dir)
	if err != nil {
		return fail(in, 2, "bad configuration", err)
	}
	b, closeBus, err := connect(ctx, in, "mesh grants", "")
	if err != nil {
		return fail(in, 2, "no bus", err)
	}
	defer closeBus()
	nodes, err := registeredNodes(ctx, b)
	if err != nil {
		return fail(in, 1, "no registrations", err)
	}
	want, err := grants.Wanted(nodes)
	if err != nil {
		return fail(in, 1, "no users", err)
	}
	have, keys, err := folder.Users()
	if err != nil {
		return fail(in, 2, "bad configuration", err)
	}
	plan := grants.Plan(have, want)
	for _, c := range plan {
		fmt.Fprintln(in.Stdout, c)
	}
	if len(plan) == 0 {
		fmt.Fprintln(in.Stdout, "no change")
	}
	if dryRun || len(plan) == 0 {
		return nil
	}
	sys, err := systemConn(in.Getenv, auth)
	if err != nil {
		return fail(in, 1, "no system connection", err)
	}
	defer sys.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	all, err := grants.Apply(ctx, auth, folder, plan, want, keys, revoked, sys, in.Now())
	if len(all) > len(revoked) {
		// What the resolver took is kept, whatever went wrong after.
		if werr := writeWhole(filepath.Join(dir, revokedFile), []byte(strings.Join(all, "\n")+"\n")); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		return fail(in, 1, "the credentials were not all given", err)
	}
	return nil
}

// registeredNodes is every node a registration names. A registration that
// does not decode stops the run: a node left out would be revoked.
func registeredNodes(ctx context.Context, b *bus.Bus) ([]string, error) {
	entries, err := bus.ReadAll(ctx, b.Modules)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for key, raw := range entries {
		r, err := bus.DecodeRegistration(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		nodes = append(nodes, r.Nodes...)
	}
	return slices.Compact(slices.Sorted(slices.Values(nodes))), nil
}

func loadAuthority(dir string) (grants.Authority, error) {
	var kps [3]nkeys.KeyPair
	for i, file := range []string{operatorSeed, accountSeed, systemSeed} {
		seed, err := os.ReadFile(filepath.Join(dir, file)) //nolint:gosec // a seed in the operator's own keys folder
		if err == nil {
			kps[i], err = nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		}
		if err != nil {
			return grants.Authority{}, fmt.Errorf("--keys: %s: %w", file, err)
		}
	}
	return grants.Authority{Operator: kps[0], Account: kps[1], System: kps[2]}, nil
}

func loadRevoked(dir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, revokedFile)) //nolint:gosec // the operator's own keys folder
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		key := strings.TrimSpace(line)
		if key == "" {
			continue
		}
		if !nkeys.IsValidPublicUserKey(key) {
			return nil, fmt.Errorf("--keys: %s: %q is not a user's public key", revokedFile, key)
		}
		out = append(out, key)
	}
	return out, nil
}

// systemConn is a connection as a user of the system account made for this
// run, which the resolver takes a changed account from.
func systemConn(getenv func(string) string, auth grants.Authority) (*nats.Conn, error) {
	url, _, _, err := busSettings(getenv)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	token, err := auth.SystemUserJWT(pub)
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, nats.UserJWTAndSeed(token, string(seed)), nats.Name("mesh grants"))
}

// writeWhole writes a file of secrets whole, mode 0600, under another name
// first.
func writeWhole(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
