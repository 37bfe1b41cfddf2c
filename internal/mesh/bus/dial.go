package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Credential is how a client proves itself to the bus: a credentials file
// (a user JWT and its nkey seed, as nsc writes them) or a file holding an
// nkey seed. Neither, the server's URL says all there is.
type Credential struct {
	CredsFile, NkeyFile string
	// Inbox is where the client's replies come back; empty, _INBOX. A part
	// on its own credential may hear only its own inbox.
	Inbox string
}

// options are the client options that present c.
func (c Credential) options() ([]nats.Option, error) {
	opts, err := c.proof()
	if err == nil && c.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.Inbox))
	}
	return opts, err
}

// proof is the client options that prove who the client is.
func (c Credential) proof() ([]nats.Option, error) {
	switch {
	case c.CredsFile != "" && c.NkeyFile != "":
		return nil, errors.New("a credentials file and an nkey seed file both given: name one")
	case c.CredsFile != "":
		return []nats.Option{nats.UserCredentials(c.CredsFile)}, nil
	case c.NkeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("the nkey seed file: %w", err)
		}
		return []nats.Option{opt}, nil
	}
	return nil, nil
}

// Connect dials the bus at url as name, presenting cred; it fails when no
// server answers now, as a command run by hand should. A connection made
// goes on reconnecting for as long as it lives.
func Connect(url, name string, cred Credential) (*nats.Conn, error) {
	opts, err := cred.options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name(name), nats.MaxReconnects(-1))...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return nc, nil
}

// Dial is Connect for a node's daemon: while no server answers, at first as
// after a loss, it goes on trying in the background, so an agent starts and
// runs its modules with the bus away. back has a value each time the
// connection is made or made again, so a pass waiting out a backoff runs at
// once.
func Dial(url, name string, cred Credential) (nc *nats.Conn, back <-chan struct{}, err error) {
	opts, err := cred.options()
	if err != nil {
		return nil, nil, err
	}
	signal := make(chan struct{}, 1)
	tell := func(*nats.Conn) {
		select {
		case signal <- struct{}{}:
		default:
		}
	}
	nc, err = nats.Connect(url, append(opts, nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(tell), nats.ReconnectHandler(tell))...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return nc, signal, nil
}

// Unanswered says whether err is the bus not answering (away, reconnecting,
// timed out, nobody subscribed) rather than an answer: what is worth trying
// again without any change on the bus.
func Unanswered(err error) bool {
	for _, away := range []error{
		nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
		nats.ErrDisconnected, nats.ErrConnectionDraining, context.DeadlineExceeded,
		jetstream.ErrNoStreamResponse, jetstream.ErrNoHeartbeat,
	} {
		if errors.Is(err, away) {
			return true
		}
	}
	return false
}
