package collector

import (
	"fmt"
	"testing"
	"time"
)

// largeFacts is the snapshot of the capture benchmark's cluster: 2,000
// bindings and 10,000 placements.
func largeFacts() Facts {
	var f Facts
	for i := range 2_000 {
		f.Bindings = append(f.Bindings, Binding{Claim: fmt.Sprintf("data-%04d", i), Node: fmt.Sprintf("node-%02d", i%50)})
	}
	for i := range 10_000 {
		f.Placements = append(f.Placements, Placement{Process: fmt.Sprintf("process-%04d", i/10), Node: fmt.Sprintf("node-%02d", i%50)})
	}
	return f
}

// BenchmarkSnapshot measures writing and reading the large snapshot, the
// part of a capture that does not depend on the API server.
func BenchmarkSnapshot(b *testing.B) {
	s := NewSnapshot("production", largeFacts(), time.Now())
	data, err := Encode(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(s); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(data)), "file-bytes")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
