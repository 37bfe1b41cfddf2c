package view

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// The bucket and key of CI's source revision.
const (
	SourcesBucket = "mesh_sources"
	SourceKey     = "source.main"
)

//go:embed schema/source.schema.json
var sourceSchemaJSON []byte

// SourceSchema is the JSON Schema of source.main, published with the project.
var SourceSchema = sourceSchemaJSON

var sourceSchema = jsondoc.MustCompile(sourceSchemaJSON, jsondoc.AssertFormats())

// Source is source.main: the revision CI built and each module's
// fingerprint at it.
type Source struct {
	Revision string            `json:"revision"`
	Modules  map[string]string `json:"modules"`
	At       time.Time         `json:"at"`
}

// DecodeSource reads source.main strictly; every module must be a name the
// bus can key.
func DecodeSource(raw []byte) (Source, error) {
	var s Source
	if err := sourceSchema.DecodeStrict(raw, &s); err != nil {
		return Source{}, fmt.Errorf("source: %w", err)
	}
	for m := range s.Modules {
		if _, err := bus.EncodeName(m); err != nil {
			return Source{}, fmt.Errorf("source %s: module %q: %w", s.Revision, m, err)
		}
	}
	return s, nil
}

// Sources opens (or makes) the bucket source.main is in.
func Sources(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := bus.OpenKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: SourcesBucket, Description: "the source revision CI built, and each module's fingerprint", Replicas: max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("open the bucket %s: %w", SourcesBucket, err)
	}
	return kv, nil
}

// WriteSource writes source.main; a revision is CI's to say, so it is
// written whole, not swapped.
func WriteSource(ctx context.Context, kv jetstream.KeyValue, s Source) error {
	if s.At.IsZero() {
		return errors.New("source: no time")
	}
	raw := bus.Encode(s)
	if _, err := DecodeSource(raw); err != nil {
		return err
	}
	if _, err := kv.Put(ctx, SourceKey, raw); err != nil {
		return fmt.Errorf("write %s: %w", SourceKey, err)
	}
	return nil
}
