package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// BenchmarkWantToHave is one node's agent on an embedded bus, a module of
// ten files (4 KiB each) served by the test binary: from its want written
// to its have running healthy, each iteration a new fingerprint, so each
// is a whole apply (lay down, stop the old, switch, start, check).
func BenchmarkWantToHave(b *testing.B) {
	n := newNode(b)
	n.start()
	files := map[string]composition.File{}
	for i := range 10 {
		files[fmt.Sprintf("etc/file-%02d", i)] = composition.File{Content: strings.Repeat("x", 4096), Mode: "0644"}
	}
	var total time.Duration
	for i := range b.N {
		fp := fmt.Sprintf("f%d", i)
		doc := n.document(fp, nil, false)
		doc.Files = files
		envelope, err := composition.Sign(context.Background(), n.signer, doc)
		if err != nil {
			b.Fatal(err)
		}
		entry, err := n.bus.WriteComposition(context.Background(), "n1", "web", fp, envelope)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n.want(fp, entry.Digest)
		n.have(fp+" running healthy", running(fp))
		total += time.Since(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/apply")
}
