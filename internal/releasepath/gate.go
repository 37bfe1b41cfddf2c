package releasepath

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// maxReleasesBody bounds the gate's answer: 1,000 Applications with their
// members and records fit in a few hundred KiB.
const maxReleasesBody = 8 << 20

// releases is the part of the Release Gate's GET /releases answer the
// path's readers read, once the gate's releases.schema.json has held the whole
// answer to its shape (every key present, revisions and statuses in range):
// each Application's warmup record.
type releases struct {
	Applications []struct {
		Namespace   string `json:"namespace"`
		Application string `json:"application"`
		Record      *struct {
			Warmup *struct {
				Revision string `json:"revision"`
				Warmed   bool   `json:"warmed"`
				Failed   *struct {
					Request string `json:"request"`
					Status  int    `json:"status"`
				} `json:"failed"`
			} `json:"warmup"`
		} `json:"record"`
	} `json:"applications"`
}

// releasesSchema is the gate's published shape of GET /releases.
var releasesSchema = jsondoc.MustCompile(release.ReleasesSchema)

// DecodeReleases reads the gate's GET /releases answer into what the path's
// readers need: every Application's warmup, keyed "<namespace>/<application>".
// An answer that is not that shape is an error, never a guess: it is held to
// the gate's JSON Schema (exact keys, every key present) before the part
// they read is taken from it.
func DecodeReleases(r io.Reader) (map[string]Warmup, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read the gate's releases: %w", err)
	}
	parsed, err := jsondoc.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("the gate's releases are not one JSON document: %s", jsondoc.OneLine(err))
	}
	if err := releasesSchema.Validate(parsed); err != nil {
		return nil, fmt.Errorf("the gate's releases are not of the gate's shape: %s", jsondoc.OneLine(err))
	}
	var doc releases
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("the gate's releases are not JSON of the expected shape: %w", err)
	}
	out := make(map[string]Warmup, len(doc.Applications))
	for i, a := range doc.Applications {
		// The key joins namespace and name with a slash, which the schema
		// does not rule out of a namespace.
		if strings.Contains(a.Namespace, "/") {
			return nil, fmt.Errorf("the gate's releases: application %d has no namespace or name", i)
		}
		if a.Record == nil || a.Record.Warmup == nil {
			continue
		}
		w := a.Record.Warmup
		warmup := Warmup{Revision: w.Revision, Warmed: w.Warmed}
		if f := w.Failed; f != nil {
			warmup.Failed = &WarmupFailure{Request: f.Request, Status: f.Status}
			warmup.Warmed = false
		}
		out[a.Namespace+"/"+a.Application] = warmup
	}
	return out, nil
}

// Warmup is what the Release Gate recorded of warming an Application up.
type Warmup struct {
	Revision string
	Warmed   bool
	// Failed is the request that stopped the warmup; nil when none did.
	Failed *WarmupFailure
}

// WarmupFailure is the request that stopped a warmup and the status it met
// (0: no answer).
type WarmupFailure struct {
	Request string
	Status  int
}

// Gate is what the Release Gate answered: its warmup record per Application
// ("<namespace>/<application>"). Answered is false when it did not answer.
type Gate struct {
	Answered bool
	Warmups  map[string]Warmup
}

// GateClient reads the Release Gate's GET /releases: the gate's own record,
// read over HTTP as the gate publishes it, never from the gate's package.
type GateClient struct {
	// URL is the gate's root, e.g. http://release-gate.delivery-system.svc.cluster.local:8080.
	URL    string
	Client *http.Client
}

// NewGateClient reads the gate at url with a bounded wait: a gate that does
// not answer in time leaves every promoted release in progress.
func NewGateClient(url string) *GateClient {
	return &GateClient{URL: strings.TrimSuffix(url, "/"), Client: &http.Client{Timeout: 10 * time.Second}}
}

// Releases asks the gate for its records; any error means the gate did not answer.
func (g *GateClient) Releases(ctx context.Context) (map[string]Warmup, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/releases", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the Release Gate: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("the Release Gate answered %s", resp.Status)
	}
	return DecodeReleases(io.LimitReader(resp.Body, maxReleasesBody))
}
