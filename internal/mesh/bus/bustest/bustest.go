// Package bustest starts what the mesh's tests need of a bus: an embedded
// JetStream server for the unit-level tests (the fault tests run the built
// nats-server as a cluster, internal/testenv), and the bus opened on one.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// Embedded starts a JetStream server in the test's process on a free
// loopback port, its store in the test's folder, and stops it when the test
// ends; it answers the URL a client dials.
func Embedded(t testing.TB) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("an embedded NATS server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.Fatal("the embedded NATS server did not take connections within 30 s")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// Connect dials urls (comma-joined, as a cluster's) for the test, going on
// at another server when one stops, and closes the connection when the
// test ends.
func Connect(t testing.TB, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Open opens the bus's buckets, in replicas copies, on the server or
// cluster at urls.
func Open(t testing.TB, urls string, replicas int) *bus.Bus {
	t.Helper()
	_, js := Connect(t, urls)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, js, bus.Options{Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
