package grants

import (
	"errors"
	"fmt"
	"slices"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/dedup"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
)

// Part is one kind of client of the bus. A put, a hand want, compose and
// grants itself use the operator's credential, which is no part here.
type Part string

// The parts that run with a credential of their own.
const (
	Assigner     Part = "assigner"
	Agent        Part = "agent"       // one per node
	BackupWorker Part = "backup-seat" // one per node
	Watchman     Part = "watchman"
	View         Part = "view" // mesh view and mesh status
	Source       Part = "source"
)

// Parts are every part, in the order the permission table lists them.
var Parts = []Part{Assigner, Agent, BackupWorker, Watchman, View, Source}

// ErrPart marks a part, or a node, the table has no row for.
var ErrPart = errors.New("no permissions for")

// Permissions are the subjects a part may publish and subscribe to; every
// other subject is refused by the server. Respond lets it answer a request
// made to it, on the requester's reply subject alone.
type Permissions struct {
	Pub, Sub []string
	Respond  bool
}

// PerNode says whether a part runs once per node, and so is granted for one.
func PerNode(p Part) bool { return p == Agent || p == BackupWorker }

// InboxPrefix is where a part's replies come back. Each part has its own,
// and may subscribe to nothing else of the kind: were every part to read
// _INBOX.>, a node could read another node's watch as the server delivers it.
func InboxPrefix(p Part, node string) (string, error) {
	if !slices.Contains(Parts, p) {
		return "", fmt.Errorf("%w the part %q", ErrPart, p)
	}
	if !PerNode(p) {
		return "_mesh_inbox." + string(p), nil
	}
	token, err := bus.EncodeName(node)
	if err != nil {
		return "", fmt.Errorf("%w %s: %w", ErrPart, p, err)
	}
	return "_mesh_inbox." + string(p) + "." + token, nil
}

// For is what part may do: node is the node of an agent or a backup worker, empty
// for the others.
func For(p Part, node string) (Permissions, error) {
	inbox, err := InboxPrefix(p, node)
	if err != nil {
		return Permissions{}, err
	}
	token := ""
	if PerNode(p) {
		token, _ = bus.EncodeName(node) // InboxPrefix checked it
	}
	var pub []string
	sub := []string{inbox + ".>"}
	respond := false
	switch p {
	case Assigner:
		// The assigner reads every bucket, each node's compositions among
		// them: wildcards keep its user the same size however many nodes
		// there are, and need no new user when a node is registered.
		pub = append(pub, readAll()...)
		pub = append(pub, kvWrite(bus.WantsBucket, ">")...)
	case Agent:
		composed, _ := bus.ComposedBucket(node)
		pub = append(pub, bind()...)
		pub = append(pub, kvRead(bus.ModulesBucket, ">")...)
		pub = append(pub, kvRead(bus.WantsBucket, "want."+token+".>")...)
		// The operator's seals on its wants, which prove a put's or a
		// hand's owner; no part may write one.
		pub = append(pub, kvRead(bus.SealsBucket, "seal."+token+".>")...)
		// A hold on what runs is what lets the rules send a node back.
		pub = append(pub, kvRead(bus.HoldsBucket, ">")...)
		pub = append(pub, kvRead(composed, ">")...)
		// Its envelopes over 64 KiB, in an object store of its own: the
		// store is granted whole, so it must hold this node's alone.
		pub = append(pub, objectRead(composed)...)
		pub = append(pub, kvRead(bus.HavesBucket, "have."+token+".>")...)
		pub = append(pub, kvWrite(bus.HavesBucket, "have."+token+".>")...)
		pub = append(pub, "mesh.backup."+token)
	case BackupWorker:
		sub = append(sub, "mesh.backup."+token)
		respond = true
	case Watchman, View:
		pub = append(pub, bind()...)
		pub = append(pub, kvRead(bus.WantsBucket, ">")...)
		pub = append(pub, kvRead(bus.HavesBucket, ">")...)
		if p == View {
			pub = append(pub, kvRead(bus.ModulesBucket, ">")...)
			pub = append(pub, kvRead(view.SourcesBucket, ">")...)
		}
		pub = append(pub, kvRead(dedup.Bucket, ">")...)
		pub = append(pub, kvWrite(dedup.Bucket, ">")...)
		pub = append(pub, "$JS.API.STREAM.INFO."+dedup.EventsStream, dedup.EventsSubjects)
	case Source:
		pub = append(pub, bind()...)
		pub = append(pub, kvRead(view.SourcesBucket, ">")...)
		pub = append(pub, kvWrite(view.SourcesBucket, "source.main")...)
	}
	return Permissions{Pub: pub, Sub: sub, Respond: respond}, nil
}

// kvRead is what reading keys (a subject pattern) of bucket takes: binding
// to its stream, a direct get of a key, a watch (an ordered consumer whose
// filter the server checks against the subject it is asked on) and its flow
// control. The stream-wide message get and pull only come with the whole
// bucket, since the key they read is in the request's body, not its subject.
func kvRead(bucket, keys string) []string {
	stream := "KV_" + bucket
	pub := []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream + ".$KV." + bucket + "." + keys,
		"$JS.API.CONSUMER.CREATE." + stream + ".*.$KV." + bucket + "." + keys,
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.FC." + stream + ".>",
	}
	if keys == ">" {
		pub = append(pub, "$JS.API.STREAM.MSG.GET."+stream, "$JS.API.CONSUMER.MSG.NEXT."+stream+".*")
	}
	return pub
}

// bind is what opening the bus takes of the buckets a part does not read:
// their streams' info (their size and names, none of their keys), since
// every part that opens the bus binds all of them.
func bind() []string {
	pub := make([]string, 0, 7)
	for _, b := range []string{bus.ModulesBucket, bus.BuildsBucket, bus.HoldsBucket, bus.GrantsBucket, bus.WantsBucket, bus.HavesBucket, bus.SealsBucket} {
		pub = append(pub, "$JS.API.STREAM.INFO.KV_"+b)
	}
	return pub
}

// readAll is what reading every bucket and the object store takes.
func readAll() []string {
	return []string{
		"$JS.API.STREAM.INFO.*",
		"$JS.API.DIRECT.GET.*.>",
		"$JS.API.CONSUMER.CREATE.*.>",
		"$JS.API.CONSUMER.DELETE.*.*",
		"$JS.API.STREAM.MSG.GET.*",
		"$JS.API.CONSUMER.MSG.NEXT.*.*",
		"$JS.FC.>",
	}
}

// kvWrite is what writing keys of bucket takes: a put, a compare-and-swap
// and a delete are all a publish on the key's subject.
func kvWrite(bucket, keys string) []string {
	return []string{"$KV." + bucket + "." + keys}
}

// objectRead is what reading an object store takes. An object's name is in
// its subject base64-encoded and its chunks under a random id, so a store
// is read whole or not at all.
func objectRead(store string) []string {
	stream := "OBJ_" + store
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream + ".$O." + store + ".M.*",
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".*.$O." + store + ".C.*",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.FC." + stream + ".>",
	}
}
