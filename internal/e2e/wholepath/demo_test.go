package wholepath_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/demo"
)

// TestTheDemoTellsOneReleaseOnTheNode tells make demo's story on the
// package's estate, in a namespace of its own: one release told from the
// real objects and logs, every part having said its piece.
func TestTheDemoTellsOneReleaseOnTheNode(t *testing.T) {
	t.Parallel()
	e := theEstate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := demo.TellOnNode(ctx, &out, e, e.Node.Namespace(t), t.TempDir())
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[flux]", "pushed 2.0.0 as oci://", "kustomize-controller applied",
		"[workflow]", "GitHub Deployment",
		"[migration]", "the gate's round started Job auth-migration-b87d7fecf08d", "completed",
		"[gate]", "may-start", "not yet", "its record says b87d7fecf08d serves",
		"[flagger]", "auth-api Progressing, iteration", "auth-ui Succeeded",
		"[reporter]", "success: ",
		"[release record]", "2.0.0 healthy",
		"auth 2.0.0 serves",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the story has no %q", want)
		}
	}
}
