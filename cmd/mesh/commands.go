package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/JorisJonkers-dev/delivery/internal/cli"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/assign"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func keyCommand(in cli.Env) *cobra.Command {
	var private, public string
	c := &cobra.Command{
		Use:   "key",
		Short: "Write a new Ed25519 key pair for signing compositions",
		Long: "mesh key writes a new Ed25519 key pair: the private key (PKCS #8 PEM, mode 0600) that \"mesh compose\"\n" +
			"signs with, and the public key (PKIX PEM) to add to MESH_TRUSTED_KEYS. It never writes over a file.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			priv, pub, err := composition.GenerateKey()
			if err != nil {
				return fail(in, 1, "no key made", err)
			}
			if err := writeNew(private, priv, 0o600); err != nil {
				return fail(in, 1, "private key not written", err)
			}
			if err := writeNew(public, pub, 0o644); err != nil {
				return fail(in, 1, "public key not written", err)
			}
			keys, _ := composition.ParsePublicKeys(pub)
			fmt.Fprintf(in.Stdout, "keyid %s\nprivate %s\npublic %s\n", composition.KeyID(keys[0]), private, public)
			return nil
		},
	}
	c.Flags().StringVar(&private, "private", "mesh.key", "where the private key is written")
	c.Flags().StringVar(&public, "public", "mesh.pub", "where the public key is written")
	return c
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode) //nolint:gosec // the operator names where the key goes
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func composeCommand(in cli.Env) *cobra.Command {
	var keyFile string
	c := &cobra.Command{
		Use:   "compose --key FILE DOCUMENT",
		Short: "Sign a composition and put it in its node's bucket",
		Long: "mesh compose signs a composition document (a file, or - for standard input) with the private key\n" +
			"and writes the envelope to composed-<node> on the bus; it prints the envelope's digest, the one a\n" +
			"want names.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return errors.New("--key: name the private key to sign with")
			}
			raw, err := readArg(args[0])
			if err != nil {
				return fail(in, 1, "no document", err)
			}
			doc, err := composition.Decode(raw)
			if err != nil {
				return fail(in, 1, "the document is refused", err)
			}
			keyRaw, err := os.ReadFile(keyFile) //nolint:gosec // the operator names the key to sign with
			if err != nil {
				return fail(in, 1, "no private key", err)
			}
			key, err := composition.ParsePrivateKey(keyRaw)
			if err != nil {
				return fail(in, 1, "no private key", err)
			}
			ctx := cmd.Context()
			envelope, err := composition.Sign(ctx, composition.NewSigner(key), doc)
			if err != nil {
				return fail(in, 1, "not signed", err)
			}
			b, closeBus, err := connect(ctx, in, "mesh compose", "")
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			defer closeBus()
			entry, err := b.WriteComposition(ctx, doc.Node, doc.Module, doc.Fingerprint, envelope)
			if err != nil {
				return fail(in, 1, "composition not written", err)
			}
			return json.NewEncoder(in.Stdout).Encode(map[string]any{"node": entry.Node, "module": entry.Module,
				"fingerprint": entry.Fingerprint, "digest": entry.Digest, "size": entry.Size, "object": entry.Object})
		},
	}
	c.Flags().StringVar(&keyFile, "key", "", "the private key to sign with (as mesh key writes it)")
	return c
}

func readArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, composition.MaxEnvelopeBytes+1))
	}
	return os.ReadFile(name) //nolint:gosec // the operator names the document to sign
}

func assignerCommand(in cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "assigner",
		Short: "Write each node's wants as the seven rules give them",
		Long: "mesh assigner watches the builds, holds, grants, compositions, registrations, wants and haves and\n" +
			"writes want.<node>.<module> when all seven rules hold, until it is stopped. It logs text lines on a\n" +
			"terminal, JSON lines elsewhere; a bad variable exits 2, a lost bus 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := settings.New(in.Getenv)
			window := env.Duration(onlineWindow.Name, assign.DefaultOnlineWindow)
			every := env.Duration(tick.Name, 15*time.Second)
			if err := env.Err(); err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			trust, err := loadTrust(in.Getenv)
			if err != nil {
				return fail(in, 2, "bad configuration", err)
			}
			ctx := cmd.Context()
			b, closeBus, err := connect(ctx, in, "mesh assigner", grants.Assigner)
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			defer closeBus()
			a := &assign.Assigner{Bus: b, Verifier: trust, Now: in.Now, OnlineWindow: window, Tick: every, Logger: in.Log}
			in.Log.Info("mesh assigner started", slog.Any("trustedKeys", trust.KeyIDs()), slog.Duration("onlineWindow", window))
			if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return fail(in, 1, "the assigner stopped", err)
			}
			return nil
		},
	}
}

func putCommand(in cli.Env) *cobra.Command {
	var end bool
	var id string
	c := &cobra.Command{
		Use:   "put [--id ID] NODE MODULE FINGERPRINT | put --end [--id ID] NODE MODULE",
		Short: "Hold one node's want of a module at a fingerprint, past the rules, until --end",
		Long: "mesh put writes want.<node>.<module> naming the fingerprint and the digest of the node's composition\n" +
			"at it, owned by put:<id>, and seals it (seal.<node>.<module> in mesh_seals, which only the operator's\n" +
			"credential may write, and which alone lets a want send a node back to an older composition): the\n" +
			"assigner passes over it until \"mesh put --end\" gives it back to the rules and takes the seal away.\n" +
			"It refuses a want a hand or another put has sealed, and a composition no trusted key signed.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if end && len(args) != 2 || !end && len(args) != 3 {
				return errors.New("name the node, the module and (without --end) the fingerprint")
			}
			ctx := cmd.Context()
			var trust *composition.Trust
			if !end {
				var err error
				if trust, err = loadTrust(in.Getenv); err != nil {
					return fail(in, 2, "bad configuration", err)
				}
			}
			b, closeBus, err := connect(ctx, in, "mesh put", "")
			if err != nil {
				return fail(in, 2, "no bus", err)
			}
			defer closeBus()
			if end {
				return putEnd(ctx, in, b, args[0], args[1], bus.PutOwner(id))
			}
			return putStart(ctx, in, b, trust, args[0], args[1], args[2], bus.PutOwner(id))
		},
	}
	c.Flags().BoolVar(&end, "end", false, "give the want back to the rules")
	c.Flags().StringVar(&id, "id", "operator", "who holds the put, recorded in the want's owner as put:<id>")
	return c
}

// putStart seals the want as the put's, then writes it. The seal, which
// only the operator's credential may write, is what says who owns the
// want: the want there may say any owner, since the assigner writes wants.
func putStart(ctx context.Context, in cli.Env, b *bus.Bus, trust *composition.Trust, node, module, fingerprint string, owner bus.Owner) error {
	_, envelope, err := b.ReadComposition(ctx, node, module, fingerprint)
	if err != nil {
		return fail(in, 1, "no composition to put", err)
	}
	if _, err := trust.OpenFor(ctx, envelope, node, module, fingerprint); err != nil {
		return fail(in, 1, "the composition is refused", err)
	}
	next := bus.Want{Fingerprint: fingerprint, Digest: bus.Digest(envelope), Owner: owner, At: in.Now().UTC()}
	if err := swapSeal(ctx, b, node, module, func(current *bus.Want) (*bus.Want, error) {
		if current != nil && current.Owner != owner {
			return nil, fmt.Errorf("the want is %s's", current.Owner)
		}
		return &next, nil
	}); err != nil {
		return fail(in, 1, "put refused", err)
	}
	return swapWant(ctx, in, b, node, module, "put", func(*bus.Want) (bus.Want, error) { return next, nil })
}

// putEnd gives the put's want back to the rules, then takes its seal away:
// an agent that reads the want still sealed reads it as the put's.
func putEnd(ctx context.Context, in cli.Env, b *bus.Bus, node, module string, owner bus.Owner) error {
	seal, _, err := b.ReadSeal(ctx, node, module)
	if err != nil {
		return fail(in, 1, "put ended refused", err)
	}
	if seal == nil || seal.Owner != owner {
		return fail(in, 1, "put ended refused", fmt.Errorf("no want of %s to end", owner))
	}
	if code := swapWant(ctx, in, b, node, module, "put ended", func(current *bus.Want) (bus.Want, error) {
		// The rules take it from what it names; the next decision moves it.
		next := *seal
		if current != nil {
			next = *current
		}
		next.Owner, next.At = bus.OwnerRules, in.Now().UTC()
		return next, nil
	}); code != nil {
		return code
	}
	if err := swapSeal(ctx, b, node, module, func(current *bus.Want) (*bus.Want, error) {
		if current != nil && current.Owner != owner {
			return nil, fmt.Errorf("the want is %s's since", current.Owner)
		}
		return nil, nil
	}); err != nil {
		return fail(in, 1, "put ended refused", err)
	}
	return nil
}

// swapSeal writes or (decide answering nil) deletes a node's seal on its
// want of module from what it holds, deciding again on a conflict. A seal
// that does not decode is taken as none.
func swapSeal(ctx context.Context, b *bus.Bus, node, module string, decide func(*bus.Want) (*bus.Want, error)) error {
	key, err := bus.SealKey(node, module)
	if err != nil {
		return err
	}
	for range 16 {
		seal, revision, err := b.ReadSeal(ctx, node, module)
		if err != nil {
			return err
		}
		next, err := decide(seal)
		if err != nil {
			return err
		}
		switch {
		case next == nil && revision == 0:
			return nil
		case next == nil:
			err = b.Seals.Delete(ctx, key, jetstream.LastRevision(revision))
		case revision == 0:
			_, err = b.Seals.Create(ctx, key, bus.Encode(*next))
		default:
			_, err = b.Seals.Update(ctx, key, bus.Encode(*next), revision)
		}
		if !bus.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("write %s in %s: %w", key, bus.SealsBucket, bus.ErrConflict)
}

// swapWant writes a node's want from what it holds, deciding again on a
// conflict.
func swapWant(ctx context.Context, in cli.Env, b *bus.Bus, node, module, what string, decide func(*bus.Want) (bus.Want, error)) error {
	key, err := bus.WantKey(node, module)
	if err != nil {
		return fail(in, 1, what+" refused", err)
	}
	var wrote bus.Want
	_, _, err = b.Swap(ctx, b.Wants, key, func(raw []byte) ([]byte, bool, error) {
		var current *bus.Want
		if raw != nil {
			w, err := bus.DecodeWant(raw)
			if err != nil {
				return nil, false, fmt.Errorf("the want there does not decode: %w", err)
			}
			current = &w
		}
		next, err := decide(current)
		if err != nil {
			return nil, false, err
		}
		wrote = next
		return bus.Encode(next), true, nil
	})
	if err != nil {
		return fail(in, 1, what+" refused", err)
	}
	in.Log.Info(what, slog.String("node", node), slog.String("module", module), slog.String("fingerprint", wrote.Fingerprint),
		slog.String("digest", wrote.Digest), slog.String("owner", string(wrote.Owner)))
	return nil
}

// fail logs why a command ends and ends it with code.
func fail(in cli.Env, code int, what string, err error) error {
	in.Log.Error(what, slog.String("error", err.Error()))
	return cli.Exit(code)
}

func loadTrust(getenv func(string) string) (*composition.Trust, error) {
	env := settings.New(getenv)
	file := env.Required(trustedKeys.Name)
	if err := env.Err(); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(file) //nolint:gosec // the keys file is the service's own setting
	if err != nil {
		return nil, fmt.Errorf("%s: %w", trustedKeys.Name, err)
	}
	keys, err := composition.ParsePublicKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", trustedKeys.Name, err)
	}
	return composition.NewTrust(keys...)
}

// busSettings reads where the bus is, how to prove oneself to it and how
// many copies of each bucket to make.
func busSettings(getenv func(string) string) (string, bus.Credential, bus.Options, error) {
	env := settings.New(getenv)
	url := env.String(natsURL.Name, natsURL.Default)
	cred := bus.Credential{CredsFile: env.String(natsCreds.Name, ""), NkeyFile: env.String(natsNkey.Name, "")}
	count := env.PositiveInt(replicas.Name, 1)
	return url, cred, bus.Options{Replicas: count}, env.Err()
}

// connect opens the bus at NATS_URL as part (empty, the operator), making
// the buckets that do not exist.
func connect(ctx context.Context, in cli.Env, name string, part grants.Part) (*bus.Bus, func(), error) {
	url, cred, opts, err := busSettings(in.Getenv)
	if err != nil {
		return nil, nil, err
	}
	if part != "" {
		if cred.Inbox, err = grants.InboxPrefix(part, ""); err != nil {
			return nil, nil, err
		}
	}
	nc, err := bus.Connect(url, name, cred)
	if err != nil {
		return nil, nil, err
	}
	reportRefusals(in, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, js, opts)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return b, nc.Close, nil
}

// reportRefusals logs what the server refuses the connection, a subject
// its credential does not allow above all: the server says so apart from
// the request, which would otherwise only wait out its time.
func reportRefusals(in cli.Env, nc *nats.Conn) {
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		in.Log.Error("the bus refused", slog.String("error", err.Error()))
	})
}
